"""GuiPoster: a function posted from any thread runs in the GUI thread, in order."""

from __future__ import annotations

import threading

from modelmon.gui.bridge import GuiPoster


def test_functions_posted_from_a_thread_run_in_the_gui_thread_in_order(qtbot):
    poster = GuiPoster()
    ran: list[tuple[int, int]] = []

    def post_from_thread() -> None:
        for number in range(5):
            poster(lambda number=number: ran.append((number, threading.get_ident())))

    thread = threading.Thread(target=post_from_thread)
    thread.start()
    thread.join(10)
    assert ran == []  # nothing runs in the posting thread
    qtbot.waitUntil(lambda: len(ran) == 5, timeout=5_000)
    assert [number for number, _ in ran] == list(range(5))
    assert {ident for _, ident in ran} == {threading.get_ident()}
