"""A program that streams a model from a bucket as boto3 users write one, timing itself: N
threads, each its own botocore client (one pooled connection), each taking the next ranged
GET of PART bytes, the bodies read and kept; then it holds its connections a moment, as a
server that has loaded does, and prints its own figures as JSON: bytes, and the seconds from
its first request to its last byte. The object bench watches it from outside and compares.

``python -m benchmarks.stream_program BUCKET KEY SIZE CONNECTIONS PART``
"""

from __future__ import annotations

import json
import sys
import threading
import time


def main(bucket: str, key: str, size: int, connections: int, part: int) -> int:
    import botocore.session
    from botocore.config import Config

    session = botocore.session.get_session()
    config = Config(s3={"addressing_style": "path"}, max_pool_connections=1)
    clients = [session.create_client("s3", config=config) for _ in range(connections)]
    ranges = [(first, min(size, first + part) - 1) for first in range(0, size, part)]
    lock, kept, taken = threading.Lock(), [], [0]

    def reader(client: object) -> None:
        while True:
            with lock:
                if taken[0] >= len(ranges):
                    return
                first, last = ranges[taken[0]]
                taken[0] += 1
            answer = client.get_object(  # type: ignore[attr-defined]
                Bucket=bucket, Key=key, Range=f"bytes={first}-{last}"
            )
            kept.append(answer["Body"].read())

    started = time.perf_counter()
    threads = [threading.Thread(target=reader, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    got = sum(len(body) for body in kept)
    time.sleep(0.5)  # connections held, as a loaded server holds them
    print(json.dumps({"bytes": got, "seconds": seconds}), flush=True)
    return 0 if got == size else 1


if __name__ == "__main__":
    bucket, key, size, connections, part = sys.argv[1:6]
    sys.exit(main(bucket, key, int(size), int(connections), int(part)))
