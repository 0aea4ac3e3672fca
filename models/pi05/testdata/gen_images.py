#!/usr/bin/python3
"""Golden resize-with-pad outputs from PyTorch (Debian python3-torch) for images_test.go.

Inputs are synthetic frames the Go test rebuilds from the same formula. For each case it writes
the value of the 3x224x224 output at 1024 fixed pseudo-random positions plus the output's sum.
Run: /usr/bin/python3 gen_images.py  (rewrites golden_images.json)
"""
import json
import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "reference"))
from pi05 import resize_with_pad  # noqa: E402  (the reference's one pre-processing)

SIZE = 224
CASES = [(100, 150), (480, 640), (224, 224), (1, 1), (300, 40), (223, 225)]


def frame(h, w):
    t = torch.arange(h * w * 3, dtype=torch.int64).reshape(h, w, 3)
    y = torch.arange(h).reshape(h, 1, 1)
    x = torch.arange(w).reshape(1, w, 1)
    c = torch.arange(3).reshape(1, 1, 3)
    return ((x * 7 + y * 13 + c * 29 + (t * 2654435761 >> 7)) % 256).to(torch.uint8)


def main():
    rng = random.Random(5)
    idx = sorted(rng.sample(range(3 * SIZE * SIZE), 1024))
    out = []
    for h, w in CASES:
        y = resize_with_pad(frame(h, w), SIZE).reshape(-1)
        out.append({"h": h, "w": w, "value": [float(y[i]) for i in idx], "sum": float(y.double().sum())})
    with open("golden_images.json", "w") as f:
        json.dump({"index": idx, "cases": out}, f)


if __name__ == "__main__":
    main()
