"""The child that loads a bucket's safetensors with Run:ai Model Streamer's S3 backend, as
vLLM's ``--load-format runai_streamer`` does, speaking ``modelmon.core.runs.run_fresh``'s
protocol: import, say ready, wait for go, stream every file, touch every tensor's bytes,
report its own bytes and seconds. Its concurrency and chunk size come from the streamer's
environment variables (``RUNAI_STREAMER_CONCURRENCY``, ``RUNAI_STREAMER_CHUNK_BYTESIZE``).

``python -m benchmarks.runai_s3 s3://bucket/model-00001.safetensors ...``
"""

from __future__ import annotations

import json
import sys
import time


def main(urls: list[str]) -> int:
    import torch
    from runai_model_streamer import SafetensorsStreamer

    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    started = time.perf_counter()
    loaded, kept = 0, []
    with SafetensorsStreamer() as streamer:
        streamer.stream_files(urls)
        for _, tensor in streamer.get_tensors():
            # One byte of every page read, as the engines' child harness touches a load.
            flat = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
            int(flat[::4096].sum())
            loaded += flat.numel()
            kept.append(tensor)
    seconds = time.perf_counter() - started
    print(json.dumps({"bytes": loaded, "seconds": seconds}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
