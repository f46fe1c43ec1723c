"""The child that loads a bucket's objects as a plain boto3 client does, speaking
``modelmon.core.runs.run_fresh``'s protocol: a fixed concurrency and part size (8 threads, 16 MiB
ranged GETs by default, as a user's script or s3transfer's defaults-ish), each body read into
one buffer the size of the object, botocore's default retries (its legacy mode: 5 tries,
throttles included). It never changes its concurrency or its part size, whatever the bucket
answers: the client a throttling bucket is compared on.

``python -m benchmarks.fixed_s3 THREADS PART_MIB s3://bucket/key ...``
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

MiB = 1 << 20


def main(argv: list[str]) -> int:
    import boto3
    from botocore.config import Config

    threads, part = int(argv[0]), int(float(argv[1]) * MiB)
    urls = argv[2:]
    client = boto3.client("s3", config=Config(max_pool_connections=threads))
    objects = []
    for url in urls:
        bucket, key = url.removeprefix("s3://").split("/", 1)
        size = client.head_object(Bucket=bucket, Key=key)["ContentLength"]
        objects.append((bucket, key, size))
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    started = time.perf_counter()
    loaded = 0
    for bucket, key, size in objects:
        memory = memoryview(bytearray(size))

        def get(
            first: int, where: tuple[str, str] = (bucket, key), into: memoryview = memory
        ) -> int:
            last = min(first + part, len(into)) - 1
            range_ = f"bytes={first}-{last}"
            data = client.get_object(Bucket=where[0], Key=where[1], Range=range_)["Body"].read()
            into[first : first + len(data)] = data
            return len(data)

        with ThreadPoolExecutor(threads) as pool:
            loaded += sum(pool.map(get, range(0, size, part)))
    seconds = time.perf_counter() - started
    print(json.dumps({"bytes": loaded, "seconds": seconds}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
