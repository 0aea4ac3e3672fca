#!/usr/bin/python3
"""PyTorch reference of RF-DETR-base inference, written from docs/rfdetr.md.

It is independent of the C program (kernels/rfdetr): plain torch ops in NCHW,
F.interpolate for the antialiased bicubic position table, F.grid_sample for
the deformable attention's bilinear sampling.

Commands (run with Debian's /usr/bin/python3 and python3-torch):
  goldens --seeds 1 2 3 --out native/testdata
      writes rfdetr_checkpoint.json (the tensor list with the random-init
      rule) and rfdetr_golden_seed<N>.json.gz (inputs and outputs per stage).
  bench --threads 2 --repeat 5
      median forward latency of this reference in fp32 with linears and
      convolutions routed through oneDNN, and in bf16 autocast.

The random checkpoint: every tensor of the real file (487 names, full size)
is filled by a counter-based generator that native/rfdetr_random.go
implements identically:
  key   = fnv1a64(name) XOR (seed * 0x9E3779B97F4A7C15)       (mod 2^64)
  z_i   = splitmix64(key + (i + 1) * 0x9E3779B97F4A7C15)      i = flat index
  u_i   = (z_i >> 40) / 2^24                                   in [0, 1)
  x_i   = float32(center + scale * (2 u_i - 1))                computed in float64
with (center, scale) per tensor from init_rule(). The input image is the
tensor "pixels" [3, 560, 560] with center 0, scale 2.
"""
import argparse
import gzip
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import onednn  # noqa: E402  (oneDNN's version and the kernel it picks here)

GOLDEN = 0x9E3779B97F4A7C15
M64 = (1 << 64) - 1
RES, GRID, PATCH, NWIN, WIN = 560, 40, 14, 4, 10
DIM, HEADS, HIDDEN, QUERIES, CLASSES = 384, 6, 256, 300, 91


# ---------------------------------------------------------------- checkpoint

def fnv1a64(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def random_tensor(name, shape, seed, center, scale):
    n = int(np.prod(shape)) if shape else 1
    key = np.uint64(fnv1a64(name) ^ ((seed * GOLDEN) & M64))
    with np.errstate(over="ignore"):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = key + i * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) / float(1 << 24)
    x = (center + scale * (2.0 * u - 1.0)).astype(np.float32)
    return torch.from_numpy(x.reshape(shape))


def checkpoint_names():
    """(name, shape) of every tensor in Roboflow/rf-detr-base's model.safetensors."""
    out = []
    B = "backbone.0.encoder.encoder."
    out += [(B + "embeddings.cls_token", [1, 1, DIM]), (B + "embeddings.mask_token", [1, DIM]),
            (B + "embeddings.position_embeddings", [1, 1370, DIM]),
            (B + "embeddings.patch_embeddings.projection.weight", [DIM, 3, PATCH, PATCH]),
            (B + "embeddings.patch_embeddings.projection.bias", [DIM])]
    for l in range(12):
        L = f"{B}encoder.layer.{l}."
        out += [(L + "norm1.weight", [DIM]), (L + "norm1.bias", [DIM])]
        for p in ("query", "key", "value"):
            out += [(L + f"attention.attention.{p}.weight", [DIM, DIM]), (L + f"attention.attention.{p}.bias", [DIM])]
        out += [(L + "attention.output.dense.weight", [DIM, DIM]), (L + "attention.output.dense.bias", [DIM]),
                (L + "layer_scale1.lambda1", [DIM]), (L + "norm2.weight", [DIM]), (L + "norm2.bias", [DIM]),
                (L + "mlp.fc1.weight", [1536, DIM]), (L + "mlp.fc1.bias", [1536]),
                (L + "mlp.fc2.weight", [DIM, 1536]), (L + "mlp.fc2.bias", [DIM]),
                (L + "layer_scale2.lambda1", [DIM])]
    out += [(B + "layernorm.weight", [DIM]), (B + "layernorm.bias", [DIM])]
    P = "backbone.0.projector.stages.0."

    def convx(prefix, cout, cin, k):
        return [(prefix + "conv.weight", [cout, cin, k, k]), (prefix + "bn.weight", [cout]), (prefix + "bn.bias", [cout])]
    out += convx(P + "0.cv1.", 256, 1536, 1)
    for m in range(3):
        out += convx(f"{P}0.m.{m}.cv1.", 128, 128, 3) + convx(f"{P}0.m.{m}.cv2.", 128, 128, 3)
    out += convx(P + "0.cv2.", 256, 640, 1)
    out += [(P + "1.weight", [256]), (P + "1.bias", [256])]
    T = "transformer."
    for l in range(3):
        D = f"{T}decoder.layers.{l}."
        out += [(D + "self_attn.in_proj_weight", [768, 256]), (D + "self_attn.in_proj_bias", [768]),
                (D + "self_attn.out_proj.weight", [256, 256]), (D + "self_attn.out_proj.bias", [256]),
                (D + "norm1.weight", [256]), (D + "norm1.bias", [256]),
                (D + "cross_attn.sampling_offsets.weight", [64, 256]), (D + "cross_attn.sampling_offsets.bias", [64]),
                (D + "cross_attn.attention_weights.weight", [32, 256]), (D + "cross_attn.attention_weights.bias", [32]),
                (D + "cross_attn.value_proj.weight", [256, 256]), (D + "cross_attn.value_proj.bias", [256]),
                (D + "cross_attn.output_proj.weight", [256, 256]), (D + "cross_attn.output_proj.bias", [256]),
                (D + "norm2.weight", [256]), (D + "norm2.bias", [256]),
                (D + "linear1.weight", [2048, 256]), (D + "linear1.bias", [2048]),
                (D + "linear2.weight", [256, 2048]), (D + "linear2.bias", [256]),
                (D + "norm3.weight", [256]), (D + "norm3.bias", [256])]
    out += [(T + "decoder.norm.weight", [256]), (T + "decoder.norm.bias", [256]),
            (T + "decoder.ref_point_head.layers.0.weight", [256, 512]), (T + "decoder.ref_point_head.layers.0.bias", [256]),
            (T + "decoder.ref_point_head.layers.1.weight", [256, 256]), (T + "decoder.ref_point_head.layers.1.bias", [256])]
    for g in range(13):
        out += [(f"{T}enc_output.{g}.weight", [256, 256]), (f"{T}enc_output.{g}.bias", [256]),
                (f"{T}enc_output_norm.{g}.weight", [256]), (f"{T}enc_output_norm.{g}.bias", [256]),
                (f"{T}enc_out_class_embed.{g}.weight", [CLASSES, 256]), (f"{T}enc_out_class_embed.{g}.bias", [CLASSES])]
        for i, o in enumerate((256, 256, 4)):
            out += [(f"{T}enc_out_bbox_embed.{g}.layers.{i}.weight", [o, 256]),
                    (f"{T}enc_out_bbox_embed.{g}.layers.{i}.bias", [o])]
    out += [("class_embed.weight", [CLASSES, 256]), ("class_embed.bias", [CLASSES])]
    for i, o in enumerate((256, 256, 4)):
        out += [(f"bbox_embed.layers.{i}.weight", [o, 256]), (f"bbox_embed.layers.{i}.bias", [o])]
    out += [("refpoint_embed.weight", [3900, 4]), ("query_feat.weight", [3900, 256])]
    return out


def init_rule(name, shape):
    """(center, scale) of the uniform init: a random network whose activations
    stay O(1) and whose class logits sit near -3 so a handful of detections
    pass a 0.5 threshold."""
    if name.endswith(("cls_token", "mask_token", "position_embeddings")):
        return 0.0, 1.0
    if name.endswith("lambda1"):
        return 0.3, 0.1
    if name.endswith("class_embed.weight") or ".enc_out_class_embed." in name and name.endswith("weight"):
        return 0.0, math.sqrt(3.0 / shape[1])
    if "class_embed" in name and name.endswith("bias"):
        return -3.0, 0.5
    if len(shape) >= 2:
        return 0.0, math.sqrt(3.0 / int(np.prod(shape[1:])))
    if name.endswith("bias"):
        return 0.0, 0.05
    return 1.0, 0.2  # LayerNorm weights (norm*, layernorm, bn, projector P.1)


def make_checkpoint(seed):
    return {n: random_tensor(n, s, seed, *init_rule(n, s)) for n, s in checkpoint_names()}


def make_pixels(seed):
    return random_tensor("pixels", [3, RES, RES], seed, 0.0, 2.0)


# ---------------------------------------------------------------- forward

def ln(x, w, b, eps):
    # Under bf16 autocast torch 1.13 returns bf16 from linears and convolutions
    # but does not cast layer_norm's input: cast it so LayerNorm runs in fp32
    # (a no-op in fp32).
    return F.layer_norm(x.to(w.dtype), (x.shape[-1],), w, b, eps)


def linear(x, w, b=None, lin=None):
    return (lin or F.linear)(x, w, b)


def forward(ck, pixels, lin=None):
    """Returns a dict of stages; pixels [3, 560, 560] normalized."""
    B = "backbone.0.encoder.encoder."
    W = lambda n: ck[n]
    lin = lin or F.linear
    out = {}
    # patch embedding + position table (antialiased bicubic 37 -> 40)
    x = F.conv2d(pixels[None], W(B + "embeddings.patch_embeddings.projection.weight"),
                 W(B + "embeddings.patch_embeddings.projection.bias"), stride=PATCH)  # [1, 384, 40, 40]
    x = x.flatten(2).transpose(1, 2)[0]  # [1600, 384], token y*40 + x
    pos = W(B + "embeddings.position_embeddings")[0]
    grid = pos[1:].reshape(1, 37, 37, DIM).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(GRID, GRID), mode="bicubic", antialias=True, align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(GRID * GRID, DIM)
    x = x + grid
    cls = W(B + "embeddings.cls_token")[0, 0] + pos[0]
    # windows: [40,40,C] -> [4,10,4,10,C] -> (wy, wx, ty, tx)
    xw = x.reshape(NWIN, WIN, NWIN, WIN, DIM).permute(0, 2, 1, 3, 4).reshape(NWIN * NWIN, WIN * WIN, DIM)
    xw = torch.cat([cls.expand(NWIN * NWIN, 1, DIM), xw], dim=1)  # [16, 101, 384]
    taps = []
    for l in range(11):  # layer 11 never feeds an output
        L = f"{B}encoder.layer.{l}."
        h = ln(xw, W(L + "norm1.weight"), W(L + "norm1.bias"), 1e-6)
        seq = xw.reshape(1, -1, DIM) if l % 3 == 2 else xw  # global layers: all 1616 tokens
        h = h.reshape(seq.shape)
        q = linear(h, W(L + "attention.attention.query.weight"), W(L + "attention.attention.query.bias"), lin)
        k = linear(h, W(L + "attention.attention.key.weight"), W(L + "attention.attention.key.bias"), lin)
        v = linear(h, W(L + "attention.attention.value.weight"), W(L + "attention.attention.value.bias"), lin)
        nb, n, _ = q.shape
        q, k, v = (t.reshape(nb, n, HEADS, 64).transpose(1, 2) for t in (q, k, v))
        a = torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1) @ v
        a = a.transpose(1, 2).reshape(nb, n, DIM)
        a = linear(a, W(L + "attention.output.dense.weight"), W(L + "attention.output.dense.bias"), lin)
        xw = xw + (W(L + "layer_scale1.lambda1") * a).reshape(xw.shape)
        h = ln(xw, W(L + "norm2.weight"), W(L + "norm2.bias"), 1e-6)
        h = F.gelu(linear(h, W(L + "mlp.fc1.weight"), W(L + "mlp.fc1.bias"), lin))
        h = linear(h, W(L + "mlp.fc2.weight"), W(L + "mlp.fc2.bias"), lin)
        xw = xw + W(L + "layer_scale2.lambda1") * h
        if l in (1, 4, 7, 10):
            t = ln(xw, W(B + "layernorm.weight"), W(B + "layernorm.bias"), 1e-6)[:, 1:]
            t = t.reshape(NWIN, NWIN, WIN, WIN, DIM).permute(0, 2, 1, 3, 4).reshape(GRID * GRID, DIM)
            taps.append(t)
    for i, t in enumerate(taps):
        out[f"tap{i}"] = t
    # projector (C2f), NCHW
    P = "backbone.0.projector.stages.0."
    feat = torch.cat(taps, dim=1).T.reshape(1, 4 * DIM, GRID, GRID)

    def convx(x, prefix, pad):
        y = F.conv2d(x, W(prefix + "conv.weight"), None, padding=pad)
        y = ln(y.permute(0, 2, 3, 1), W(prefix + "bn.weight"), W(prefix + "bn.bias"), 1e-6)
        return F.silu(y.permute(0, 3, 1, 2))
    y = convx(feat, P + "0.cv1.", 0)
    ys = [y[:, :128], y[:, 128:]]
    for m in range(3):
        ys.append(convx(convx(ys[-1], f"{P}0.m.{m}.cv1.", 1), f"{P}0.m.{m}.cv2.", 1))
    y = convx(torch.cat(ys, dim=1), P + "0.cv2.", 0)
    mem = ln(y.permute(0, 2, 3, 1), W(P + "1.weight"), W(P + "1.bias"), 1e-6)
    mem = mem.reshape(GRID * GRID, HIDDEN)
    out["memory"] = mem
    # two-stage selection (group 0)
    T = "transformer."
    ys_, xs_ = torch.meshgrid(torch.arange(GRID, dtype=mem.dtype), torch.arange(GRID, dtype=mem.dtype), indexing="ij")
    prop = torch.stack([(xs_.flatten() + 0.5) / GRID, (ys_.flatten() + 0.5) / GRID,
                        torch.full((GRID * GRID,), 0.05, dtype=mem.dtype), torch.full((GRID * GRID,), 0.05, dtype=mem.dtype)], 1)
    q = ln(linear(mem, W(T + "enc_output.0.weight"), W(T + "enc_output.0.bias"), lin),
           W(T + "enc_output_norm.0.weight"), W(T + "enc_output_norm.0.bias"), 1e-5)
    cls_logits = linear(q, W(T + "enc_out_class_embed.0.weight"), W(T + "enc_out_class_embed.0.bias"), lin)
    d = mlp(q, ck, T + "enc_out_bbox_embed.0.layers.", lin)
    coord = torch.cat([d[:, :2] * prop[:, 2:] + prop[:, :2], d[:, 2:].exp() * prop[:, 2:]], 1)
    topk = torch.topk(cls_logits.max(-1)[0], QUERIES).indices
    ref_ts = coord[topk]
    r0 = W("refpoint_embed.weight")[:QUERIES]
    ref = torch.cat([r0[:, :2] * ref_ts[:, 2:] + ref_ts[:, :2], r0[:, 2:].exp() * ref_ts[:, 2:]], 1)
    out["topk"] = topk.to(mem.dtype)
    out["ref"] = ref
    tgt = W("query_feat.weight")[:QUERIES]
    # decoder
    qpos = sine_embed(ref)
    qpos = linear(F.relu(linear(qpos, W(T + "decoder.ref_point_head.layers.0.weight"), W(T + "decoder.ref_point_head.layers.0.bias"), lin)),
                  W(T + "decoder.ref_point_head.layers.1.weight"), W(T + "decoder.ref_point_head.layers.1.bias"), lin)
    value_map = None
    for l in range(3):
        D = f"{T}decoder.layers.{l}."
        wi, bi = W(D + "self_attn.in_proj_weight"), W(D + "self_attn.in_proj_bias")
        qk = tgt + qpos
        qh = linear(qk, wi[:256], bi[:256], lin).reshape(QUERIES, 8, 32).transpose(0, 1)
        kh = linear(qk, wi[256:512], bi[256:512], lin).reshape(QUERIES, 8, 32).transpose(0, 1)
        vh = linear(tgt, wi[512:], bi[512:], lin).reshape(QUERIES, 8, 32).transpose(0, 1)
        sa = (torch.softmax(qh @ kh.transpose(-1, -2) / math.sqrt(32), -1) @ vh).transpose(0, 1).reshape(QUERIES, 256)
        sa = linear(sa, W(D + "self_attn.out_proj.weight"), W(D + "self_attn.out_proj.bias"), lin)
        tgt = ln(tgt + sa, W(D + "norm1.weight"), W(D + "norm1.bias"), 1e-5)
        qq = tgt + qpos
        value = linear(mem, W(D + "cross_attn.value_proj.weight"), W(D + "cross_attn.value_proj.bias"), lin)
        off = linear(qq, W(D + "cross_attn.sampling_offsets.weight"), W(D + "cross_attn.sampling_offsets.bias"), lin).reshape(QUERIES, 16, 2, 2)
        aw = linear(qq, W(D + "cross_attn.attention_weights.weight"), W(D + "cross_attn.attention_weights.bias"), lin)
        aw = torch.softmax(aw.reshape(QUERIES, 16, 2), -1)
        loc = ref[:, None, None, :2] + off / 2 * ref[:, None, None, 2:] * 0.5  # [300, 16, 2, 2]
        vmap = value.T.reshape(16, 16, GRID, GRID)  # [head, dim, y, x]
        grid_ = (2 * loc - 1).permute(1, 0, 2, 3)  # [16 heads, 300, 2 points, xy]
        samp = F.grid_sample(vmap.float(), grid_.float(), mode="bilinear", padding_mode="zeros", align_corners=False)  # [16, 16, 300, 2]
        ca = (samp * aw.permute(1, 0, 2)[:, None]).sum(-1)  # [16 heads, 16 dims, 300]
        ca = ca.permute(2, 0, 1).reshape(QUERIES, 256)
        ca = linear(ca, W(D + "cross_attn.output_proj.weight"), W(D + "cross_attn.output_proj.bias"), lin)
        tgt = ln(tgt + ca, W(D + "norm2.weight"), W(D + "norm2.bias"), 1e-5)
        ff = linear(F.relu(linear(tgt, W(D + "linear1.weight"), W(D + "linear1.bias"), lin)), W(D + "linear2.weight"), W(D + "linear2.bias"), lin)
        tgt = ln(tgt + ff, W(D + "norm3.weight"), W(D + "norm3.bias"), 1e-5)
    hs = ln(tgt, W(T + "decoder.norm.weight"), W(T + "decoder.norm.bias"), 1e-5)
    out["hs"] = hs
    out["logits"] = linear(hs, W("class_embed.weight"), W("class_embed.bias"), lin)
    dl = mlp(hs, ck, "bbox_embed.layers.", lin)
    out["boxes"] = torch.cat([dl[:, :2] * ref[:, 2:] + ref[:, :2], dl[:, 2:].exp() * ref[:, 2:]], 1)
    return out


def mlp(x, ck, prefix, lin):
    for i in range(3):
        x = lin(x, ck[f"{prefix}{i}.weight"], ck[f"{prefix}{i}.bias"])
        if i < 2:
            x = F.relu(x)
    return x


def sine_embed(ref):
    """gen_sineembed for 4-d boxes: (y, x, w, h), 128 features each, interleaved sin/cos."""
    scale = 2 * math.pi
    dim_t = torch.arange(128, dtype=ref.dtype)
    dim_t = 10000 ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / 128)
    parts = []
    for c in (1, 0, 2, 3):
        e = ref[:, c, None] * scale / dim_t
        parts.append(torch.stack((e[:, 0::2].sin(), e[:, 1::2].cos()), dim=2).flatten(1))
    return torch.cat(parts, dim=1)


# ---------------------------------------------------------------- commands

SUBSAMPLE = {"tap0": 211, "tap1": 211, "tap2": 211, "tap3": 211, "memory": 211, "hs": 31}


def cmd_goldens(args):
    os.makedirs(args.out, exist_ok=True)
    names = checkpoint_names()
    manifest = {"generator": "splitmix64 counter, see tools/reference/rfdetr.py",
                "tensors": [{"name": n, "shape": s, "center": init_rule(n, s)[0], "scale": init_rule(n, s)[1]}
                            for n, s in names],
                "pixels": {"name": "pixels", "shape": [3, RES, RES], "center": 0.0, "scale": 2.0}}
    with open(os.path.join(args.out, "rfdetr_checkpoint.json"), "w") as f:
        json.dump(manifest, f, indent=0)
    torch.set_num_threads(args.threads)
    for seed in args.seeds:
        t0 = time.time()
        ck = make_checkpoint(seed)
        pix = make_pixels(seed)
        with torch.no_grad():
            out = forward(ck, pix, lin=OneDNNLinear(ck) if args.onednn else None)
        g = {"seed": seed, "stages": {}}
        for k, v in out.items():
            flat = v.detach().to(torch.float32).flatten()
            step = SUBSAMPLE.get(k, 1)
            g["stages"][k] = {"shape": list(v.shape), "stride": step,
                              "values": [float("%.9g" % x) for x in flat[::step].tolist()]}
        path = os.path.join(args.out, f"rfdetr_golden_seed{seed}.json.gz")
        with gzip.open(path, "wt") as f:
            json.dump(g, f, separators=(",", ":"))
        det = int((torch.sigmoid(out["logits"]) > 0.5).sum())
        print(f"seed {seed}: {time.time() - t0:.1f}s, {det} query-label pairs above 0.5 -> {path}", file=sys.stderr)


class OneDNNLinear:
    """fp32 Linear through oneDNN (Debian's torch runs fp32 matmul on a generic
    BLAS). Checkpoint weights are converted to oneDNN's layout once, like the C
    program packs them once; activations are converted per call. The attention
    matmuls stay torch.matmul (the benchmark's peer: linears and convolutions on
    oneDNN)."""

    def __init__(self, ck):
        self.ranges = sorted((t.data_ptr(), t.data_ptr() + t.numel() * 4) for t in ck.values())
        self.cache = {}

    def _is_weight(self, w):
        p = w.data_ptr()
        return any(a <= p < b for a, b in self.ranges)

    def _packed(self, w):
        if not self._is_weight(w):
            return w.contiguous().to_mkldnn()
        key = (w.data_ptr(), tuple(w.shape))
        if key not in self.cache:
            self.cache[key] = w.contiguous().to_mkldnn()
        return self.cache[key]

    def __call__(self, x, w, b=None):
        shape = x.shape
        bb = None
        if b is not None:
            bb = self._packed(b)
        y = torch._C._nn.mkldnn_linear(x.reshape(-1, shape[-1]).contiguous().to_mkldnn(), self._packed(w), bb).to_dense()
        return y.reshape(*shape[:-1], w.shape[0])


def cmd_bench(args):
    torch.set_num_threads(args.threads)
    ck = make_checkpoint(1)
    pix = make_pixels(1)
    res = {}
    with torch.no_grad(), torch.backends.mkldnn.flags(enabled=True):
        times = []
        lin = OneDNNLinear(ck)
        for i in range(args.repeat + 1):
            t0 = time.perf_counter()
            forward(ck, pix, lin=lin)
            times.append(time.perf_counter() - t0)
        res["fp32_onednn_ms"] = statistics.median(times[1:]) * 1e3
        times = []
        with torch.autocast("cpu", dtype=torch.bfloat16):
            for i in range(args.repeat + 1):
                t0 = time.perf_counter()
                forward(ck, pix)
                times.append(time.perf_counter() - t0)
        res["bf16_autocast_ms"] = statistics.median(times[1:]) * 1e3
    res["threads"] = args.threads
    res["config"] = ("PyTorch %s (oneDNN %s; linears on %s in fp32, %s in bf16), %d threads: fp32 with every linear through mkldnn_linear on weights "
                     "converted to oneDNN once and the convolutions on oneDNN, attention matmuls on torch.matmul; "
                     "bf16: torch.autocast(cpu, bfloat16)" % (torch.__version__, onednn.version(), onednn.kernel(torch.float32),
                        onednn.kernel(torch.bfloat16), args.threads))
    print(json.dumps(res))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("goldens")
    g.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    g.add_argument("--out", default="native/testdata")
    g.add_argument("--threads", type=int, default=2)
    g.add_argument("--onednn", action="store_true", help="route fp32 linears through oneDNN (faster)")
    b = sub.add_parser("bench")
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    {"goldens": cmd_goldens, "bench": cmd_bench}[args.cmd](args)


if __name__ == "__main__":
    main()
