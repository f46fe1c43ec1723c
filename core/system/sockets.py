"""The machine's TCP sockets as the kernel counts them: each one's addresses, state and the
bytes it has received (``tcp_info.tcpi_bytes_received``), by inode, from one netlink
``sock_diag`` dump; and the socket inodes a process holds (``/proc/PID/fd``).

What a program streams from a bucket arrives over its sockets, not through the page cache:
the bytes received on its connections to the endpoint are that arrival, counted by the
kernel for each socket whoever reads it (a C++ thread pool, Python, a child process).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
import time
from dataclasses import dataclass

from modelmon.core.system.readiness import wait_readable

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_INFO = 2  # the tcp_info attribute
ALL_STATES = 0xFFFFFFFF
TCP_LISTEN = 10  # the kernel's TCP state of a listening socket
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
_REQUEST = struct.Struct("=BBBBI48s")  # inet_diag_req_v2: family, protocol, ext, pad, states, id
_MESSAGE = struct.Struct("=BBBB2s2s16s16sIQIIIII")  # inet_diag_msg
_ATTRIBUTE = struct.Struct("=HH")  # rtattr: len, type
# struct tcp_info: 8 bytes of u8 fields, then u32 fields up to total_retrans (104), the u64
# pacing rates, bytes_acked (120), bytes_received (128).
BYTES_RECEIVED_AT = 128
LAST_DATA_RECEIVED_AT = 52  # tcpi_last_data_recv in struct tcp_info


@dataclass(frozen=True, slots=True)
class TcpSocket:
    inode: int
    local: tuple[str, int]
    remote: tuple[str, int]
    state: int  # the kernel's TCP state (1: established)
    bytes_received: int  # payload bytes received on it so far (tcpi_bytes_received)
    # The kernel's cookie: names this socket alone for the boot (its dump and its destroy
    # broadcast alike), where its ends may be a new connection's once it is freed.
    cookie: int
    # ms from the last bytes it received to when the kernel wrote this entry
    # (tcpi_last_data_recv); None where the entry has no tcp_info.
    idle_ms: int | None = None


def _address(family: int, raw: bytes) -> str:
    if family == socket.AF_INET:
        return str(ipaddress.IPv4Address(raw[:4]))
    address = ipaddress.IPv6Address(raw)
    mapped = address.ipv4_mapped
    return str(mapped) if mapped is not None else str(address)


def _dump(family: int, states: int = ALL_STATES) -> list[TcpSocket]:
    found: list[TcpSocket] = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as link:
        request = _REQUEST.pack(
            family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 0, states, bytes(48)
        )
        header = _HEADER.pack(
            _HEADER.size + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0
        )
        link.send(header + request)
        while True:
            data = link.recv(1 << 16)
            at = 0
            while at + _HEADER.size <= len(data):
                length, kind, _, _, _ = _HEADER.unpack_from(data, at)
                if length < _HEADER.size:
                    return found
                if kind == NLMSG_DONE:
                    return found
                if kind == NLMSG_ERROR:
                    (code,) = struct.unpack_from("=i", data, at + _HEADER.size)
                    raise OSError(-code, os.strerror(-code), "sock_diag")
                if kind == SOCK_DIAG_BY_FAMILY:
                    found.append(_socket(data, at + _HEADER.size, at + length))
                at += (length + 3) & ~3


def _socket(data: bytes, start: int, end: int) -> TcpSocket:
    (family, state, _, _, sport, dport, src, dst, _, cookie, _, _, _, _, inode) = (
        _MESSAGE.unpack_from(data, start)
    )
    received, idle_ms = 0, None
    at = start + _MESSAGE.size
    while at + _ATTRIBUTE.size <= end:
        length, kind = _ATTRIBUTE.unpack_from(data, at)
        if length < _ATTRIBUTE.size:
            break
        payload = data[at + _ATTRIBUTE.size : at + length]
        if kind == INET_DIAG_INFO and len(payload) >= BYTES_RECEIVED_AT + 8:
            (received,) = struct.unpack_from("=Q", payload, BYTES_RECEIVED_AT)
            (idle_ms,) = struct.unpack_from("=I", payload, LAST_DATA_RECEIVED_AT)
        at += (length + 3) & ~3
    return TcpSocket(
        inode,
        (_address(family, src), int.from_bytes(sport, "big")),
        (_address(family, dst), int.from_bytes(dport, "big")),
        state,
        received,
        cookie,
        idle_ms,
    )


def all_tcp_sockets() -> list[TcpSocket]:
    """Every TCP socket of this network namespace (IPv4 and IPv6), those no process holds
    (closing, in TIME_WAIT: inode 0) included."""
    return [entry for family in (socket.AF_INET, socket.AF_INET6) for entry in _dump(family)]


def listening_sockets() -> list[TcpSocket]:
    """The listening TCP sockets a process holds (IPv4 and IPv6): one small dump, as the
    kernel filters by state."""
    return [
        entry
        for family in (socket.AF_INET, socket.AF_INET6)
        for entry in _dump(family, 1 << TCP_LISTEN)
        if entry.inode
    ]


def tcp_sockets() -> dict[int, TcpSocket]:
    """The TCP sockets a process holds (IPv4 and IPv6), by inode."""
    return {entry.inode: entry for entry in all_tcp_sockets() if entry.inode}


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process ``pid`` holds open (empty when it is gone or its
    descriptors cannot be read)."""
    inodes: set[int] = set()
    folder = f"/proc/{pid}/fd"
    try:
        names = os.listdir(folder)
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(f"{folder}/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


# Multicast groups of the destroyed TCP sockets (needs CAP_NET_ADMIN): each message is the
# socket's last diag, tcp_info included, sent as the kernel frees it.
SKNLGRP_INET_TCP_DESTROY, SKNLGRP_INET6_TCP_DESTROY = 1, 3


class DestroyedSockets:
    """The TCP sockets the kernel frees from now on, each with its last counts, heard on
    sock_diag's destroy broadcasts: what a connection received after the last look at it
    (a loader closes its connections as its last bytes arrive). A freed socket has no inode:
    it is known by its cookie. ``unavailable`` says why nothing is heard (not root)."""

    def __init__(self) -> None:
        self.unavailable: str | None = None
        self._link: socket.socket | None = None
        self._pending: list[TcpSocket] = []  # heard while settling, not drained yet
        try:
            link = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
            groups = (1 << (SKNLGRP_INET_TCP_DESTROY - 1)) | (1 << (SKNLGRP_INET6_TCP_DESTROY - 1))
            link.bind((0, groups))
            link.setblocking(False)
            link.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
            self._link = link
        except OSError as exc:
            self.unavailable = f"closed connections are not heard ({exc.strerror or exc})"

    def fileno(self) -> int:
        """The broadcast's descriptor, to wait on (-1 when nothing is heard)."""
        return self._link.fileno() if self._link is not None else -1

    def drain(self) -> list[TcpSocket]:
        """The sockets freed since the last drain (never blocks)."""
        found, self._pending = self._pending, []
        if self._link is None:
            return found
        while True:
            try:
                data = self._link.recv(1 << 16)
            except BlockingIOError:
                return found
            except OSError as exc:  # ENOBUFS: some were dropped before this drain
                self.unavailable = f"some closed connections were not heard ({exc.strerror})"
                return found
            at = 0
            while at + _HEADER.size <= len(data):
                length, kind, _, _, _ = _HEADER.unpack_from(data, at)
                if length < _HEADER.size:
                    break
                if kind == SOCK_DIAG_BY_FAMILY:
                    found.append(_socket(data, at + _HEADER.size, at + length))
                at += (length + 3) & ~3

    def settle(self, most_s: float = 0.2, quiet_s: float = 0.02) -> None:
        """Wait until no freed socket has been announced for ``quiet_s`` (``most_s`` at
        most): the kernel announces them from a work queue, just after the close."""
        if self._link is None:
            return
        deadline = time.monotonic() + most_s
        while (left := deadline - time.monotonic()) > 0:
            if not wait_readable(self._link.fileno(), min(quiet_s, left)):
                return
            heard = self.drain()  # takes what was pending too
            self._pending = heard

    def close(self) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None
