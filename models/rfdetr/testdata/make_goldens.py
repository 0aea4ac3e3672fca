#!/usr/bin/python3
"""Golden outputs for models/rfdetr's pre- and post-processing, computed with
PyTorch independently of the Go code. Run from this directory with Debian's
python3-torch (no torchvision or PIL needed):

    /usr/bin/python3 make_goldens.py

Writes preprocess_golden.bin and postprocess_golden.json (+ its inputs
postprocess_logits.bin, postprocess_boxes.bin). `make test` only reads them.

Pre-processing is upstream rfdetr's predict(): to_tensor (/255), normalize with
the ImageNet mean/std, then F.interpolate(size=(560, 560), mode="bilinear",
align_corners=False, antialias=True) — what torchvision's resize calls on a
tensor. The test images are a formula both languages compute (testImage in
preprocess_test.go).

Post-processing is upstream's PostProcess: sigmoid, top-300 over the
flattened 300x91 (query, label) pairs, query = idx // 91, label = idx % 91,
cxcywh -> xyxy scaled by (W, H), keep score > threshold; then the seed
server's extras: clamp to the image, at most max_detections.
"""
import json
import struct

import numpy as np
import torch
import torch.nn.functional as F

MEAN = torch.tensor([0.485, 0.456, 0.406], dtype=torch.float32).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225], dtype=torch.float32).view(3, 1, 1)

# (width, height): downscale, upscale, mixed, identity, degenerate, odd
SIZES = [(640, 480), (100, 37), (1000, 300), (560, 560), (1, 1), (3, 2000), (561, 1120)]
SAMPLES = 1500


def test_image(w, h):
    """uint8 [h, w, 3]; keep in sync with testImage in preprocess_test.go."""
    y, x = np.meshgrid(np.arange(h, dtype=np.int64), np.arange(w, dtype=np.int64), indexing="ij")
    img = np.empty((h, w, 3), dtype=np.uint8)
    for c in range(3):
        img[:, :, c] = ((x * 7 + y * 13 + c * 29 + ((x * y + c) % 17) * 5) % 256).astype(np.uint8)
    return img


def preprocess(img):
    t = torch.from_numpy(img).permute(2, 0, 1).contiguous().to(torch.float32).div(255)
    t = t.sub(MEAN).div(STD)
    return F.interpolate(t[None], size=(560, 560), mode="bilinear", align_corners=False, antialias=True)[0]


def write_preprocess():
    rng = np.random.default_rng(7)
    with open("preprocess_golden.bin", "wb") as f:
        f.write(struct.pack("<i", len(SIZES)))
        for w, h in SIZES:
            out = preprocess(test_image(w, h)).numpy().reshape(-1)
            n = out.size
            idx = np.concatenate([[0, 559, 560 * 559, n - 1], rng.integers(0, n, SAMPLES - 4)]).astype(np.uint32)
            f.write(struct.pack("<iii", w, h, len(idx)))
            for i in idx:
                f.write(struct.pack("<If", int(i), float(out[i])))
            sums = out.reshape(3, -1).astype(np.float64).sum(axis=1)
            f.write(struct.pack("<ddd", *sums))


def postprocess(logits, boxes, w, h, threshold, max_det):
    prob = torch.sigmoid(logits).reshape(-1)
    scores, idx = torch.topk(prob, 300)
    q = idx // 91
    labels = idx % 91
    cx, cy, bw, bh = boxes.unbind(-1)
    xyxy = torch.stack([cx - 0.5 * bw, cy - 0.5 * bh, cx + 0.5 * bw, cy + 0.5 * bh], -1)
    xyxy = xyxy[q] * torch.tensor([w, h, w, h], dtype=torch.float32)
    keep = scores > threshold
    out = []
    for s, qq, l, b in zip(scores[keep], q[keep], labels[keep], xyxy[keep]):
        b = [min(max(float(b[0]), 0.0), w), min(max(float(b[1]), 0.0), h),
             min(max(float(b[2]), 0.0), w), min(max(float(b[3]), 0.0), h)]
        out.append({"query": int(qq), "label_id": int(l), "score": float(s), "box": b})
    return out[:max_det]


def write_postprocess():
    g = torch.Generator().manual_seed(11)
    logits = (torch.randn(300, 91, generator=g) * 2.5 - 5).to(torch.float32)
    # a few confident queries with two strong labels each, as trained models produce
    for qq in (3, 77, 150, 299):
        logits[qq, 17] = 4.0 + qq / 100
        logits[qq, 63] = 2.0 + qq / 1000
    boxes = torch.rand(300, 4, generator=g).to(torch.float32)
    boxes[:, 2:] = boxes[:, 2:] * 0.8  # some boxes cross the image edge
    logits.numpy().astype("<f4").tofile("postprocess_logits.bin")
    boxes.numpy().astype("<f4").tofile("postprocess_boxes.bin")
    cases = []
    for w, h, thr, md in [(640, 480, 0.5, 100), (640, 480, 0.3, 5), (33, 1000, 0.0, 300), (640, 480, 0.99, 100)]:
        cases.append({"width": w, "height": h, "threshold": thr, "max_detections": md,
                      "detections": postprocess(logits, boxes, w, h, thr, md)})
    with open("postprocess_golden.json", "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, indent=0)


if __name__ == "__main__":
    write_preprocess()
    write_postprocess()
