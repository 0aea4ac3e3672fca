#!/usr/bin/python3
"""PyTorch reference of pi0.5 (lerobot/pi05_base) inference, written from docs/pi05.md.

It is the independent check of the C megakernels in kernels/pi05 (llm.c style: this file writes the
weights and the expected outputs, the C and Go tests compare against them). It deliberately computes
the way lerobot does -- the whole padded prefix with additive masks and cumsum positions -- while the
kernels drop masked tokens, so a masking or position bug shows up as a difference.

Two precisions:
  fp32  every op in float32 (the kernels' scalar path must agree within 1e-4);
  bf16  weights and matmul inputs in bfloat16 (torch bf16 linears, oneDNN), fp32 for the patch and
        position embeddings, norms, softmax, the time embedding and MLP, the adaRMS modulation and the
        action in/out projections (the kernels' fast path must agree within 2e-2).

Commands (Debian's /usr/bin/python3 with python3-torch; no other module):
  pi05.py checkpoint --out DIR [--full] [--dtype f32|bf16] [--seed N] [--vision-layers N --layers N]
                                                                       random checkpoint, real tensor names
  pi05.py goldens --out DIR                                            tiny checkpoint + parity goldens
  pi05.py golden --weights DIR --out FILE [--camera-mask 0,1 ...]      one golden case on any checkpoint
  pi05.py request --weights DIR --out FILE.json                        an HTTP request and its actions

The benchmark peer is pi05_peer.py (the fastest PyTorch configuration of the same computation).
"""
import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

MASK_VALUE = -2.3819763e38  # lerobot/openpi OPENPI_ATTENTION_MASK_VALUE
ACTION_DIM = 32

VIS = "paligemma_with_expert.paligemma.model.vision_tower.vision_model."
PROJ = "paligemma_with_expert.paligemma.model.multi_modal_projector.linear."
LM = "paligemma_with_expert.paligemma.model.language_model."
EMBED = "paligemma_with_expert.paligemma.lm_head.weight"
EX = "paligemma_with_expert.gemma_expert.model."

# Full-size dims (lerobot/pi05_base) and the tiny dims of the committed goldens.
FULL = dict(image=224, patch=14, v_width=1152, v_layers=27, v_heads=16, v_mlp=4304, v_eps=1e-6,
            l_width=2048, l_layers=18, l_heads=8, l_kv=1, head_dim=256, l_mlp=16384, vocab=257152,
            e_width=1024, e_mlp=4096, e_heads=8, eps=1e-6, theta=10000.0,
            min_period=4e-3, max_period=4.0)
TINY = dict(image=56, patch=14, v_width=64, v_layers=2, v_heads=4, v_mlp=120, v_eps=1e-6,
            l_width=64, l_layers=2, l_heads=8, l_kv=1, head_dim=16, l_mlp=192, vocab=512,
            e_width=32, e_mlp=96, e_heads=8, eps=1e-6, theta=10000.0,
            min_period=4e-3, max_period=4.0)


# ---------------------------------------------------------------- safetensors (no extra module)

DTYPES = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2), "I32": (torch.int32, 4),
          "U8": (torch.uint8, 1), "F64": (torch.float64, 8)}


def save_safetensors(path, tensors, metadata=None):
    """Write tensors (name -> torch tensor) in the safetensors format, streaming one tensor at a time."""
    header, offset = {}, 0
    names = sorted(tensors)
    for name in names:
        t = tensors[name]
        dt = {v[0]: k for k, v in DTYPES.items()}[t.dtype]
        n = t.numel() * t.element_size()
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    if metadata:
        header["__metadata__"] = metadata
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name in names:
            t = tensors[name].contiguous()
            if t.dtype == torch.bfloat16:
                t = t.view(torch.int16)
            f.write(t.numpy().tobytes() if t.numel() else b"")
    os.replace(tmp, path)


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, h in header.items():
            if name == "__metadata__":
                continue
            dtype, size = DTYPES[h["dtype"]]
            a, b = h["data_offsets"]
            f.seek(base + a)
            buf = bytearray(f.read(b - a))
            if dtype == torch.bfloat16:
                t = torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16) if buf else torch.empty(0)
            else:
                t = torch.frombuffer(buf, dtype=dtype) if buf else torch.empty(0, dtype=dtype)
            out[name] = t.reshape(h["shape"])
    return out


# ---------------------------------------------------------------- random checkpoints

def checkpoint_shapes(d):
    """The lerobot tensor names and shapes for dims d (PyTorch Linear weights are [out, in])."""
    s = {}
    vw, lw, ew, hd = d["v_width"], d["l_width"], d["e_width"], d["head_dim"]
    npos = (d["image"] // d["patch"]) ** 2
    s[VIS + "embeddings.patch_embedding.weight"] = [vw, 3, d["patch"], d["patch"]]
    s[VIS + "embeddings.patch_embedding.bias"] = [vw]
    s[VIS + "embeddings.position_embedding.weight"] = [npos, vw]
    for i in range(d["v_layers"]):
        p = VIS + f"encoder.layers.{i}."
        for n in ("layer_norm1", "layer_norm2"):
            s[p + n + ".weight"] = [vw]
            s[p + n + ".bias"] = [vw]
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            s[p + "self_attn." + n + ".weight"] = [vw, vw]
            s[p + "self_attn." + n + ".bias"] = [vw]
        s[p + "mlp.fc1.weight"] = [d["v_mlp"], vw]
        s[p + "mlp.fc1.bias"] = [d["v_mlp"]]
        s[p + "mlp.fc2.weight"] = [vw, d["v_mlp"]]
        s[p + "mlp.fc2.bias"] = [vw]
    s[VIS + "post_layernorm.weight"] = [vw]
    s[VIS + "post_layernorm.bias"] = [vw]
    s[PROJ + "weight"] = [lw, vw]
    s[PROJ + "bias"] = [lw]
    s[EMBED] = [d["vocab"], lw]
    def gemma_linears(p, heads, width, mlp):
        """The attention and MLP weights of one Gemma layer (prefix or expert): no biases."""
        s[p + "self_attn.q_proj.weight"] = [heads * hd, width]
        s[p + "self_attn.k_proj.weight"] = [d["l_kv"] * hd, width]
        s[p + "self_attn.v_proj.weight"] = [d["l_kv"] * hd, width]
        s[p + "self_attn.o_proj.weight"] = [width, heads * hd]
        s[p + "mlp.gate_proj.weight"] = [mlp, width]
        s[p + "mlp.up_proj.weight"] = [mlp, width]
        s[p + "mlp.down_proj.weight"] = [width, mlp]
    for i in range(d["l_layers"]):
        p = LM + f"layers.{i}."
        gemma_linears(p, d["l_heads"], lw, d["l_mlp"])
        s[p + "input_layernorm.weight"] = [lw]
        s[p + "post_attention_layernorm.weight"] = [lw]
    s[LM + "norm.weight"] = [lw]
    for i in range(d["l_layers"]):
        p = EX + f"layers.{i}."
        gemma_linears(p, d["e_heads"], ew, d["e_mlp"])
        for n in ("input_layernorm", "post_attention_layernorm"):
            s[p + n + ".dense.weight"] = [3 * ew, ew]
            s[p + n + ".dense.bias"] = [3 * ew]
    s[EX + "norm.dense.weight"] = [3 * ew, ew]
    s[EX + "norm.dense.bias"] = [3 * ew]
    s["action_in_proj.weight"] = [ew, ACTION_DIM]
    s["action_in_proj.bias"] = [ew]
    s["action_out_proj.weight"] = [ACTION_DIM, ew]
    s["action_out_proj.bias"] = [ACTION_DIM]
    s["time_mlp_in.weight"] = [ew, ew]
    s["time_mlp_in.bias"] = [ew]
    s["time_mlp_out.weight"] = [ew, ew]
    s["time_mlp_out.bias"] = [ew]
    return s


def random_tensor(name, shape, gen):
    """Scaled so activations stay O(1) through the depth: Linear ~ U/sqrt(fan_in), norms near 0 or 1."""
    t = torch.randn(shape, generator=gen)
    if name.endswith("layer_norm1.weight") or name.endswith("layer_norm2.weight") or \
            name.endswith("post_layernorm.weight"):
        return 1.0 + 0.1 * t                      # LayerNorm scales multiply directly
    if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
        return 0.1 * t                            # Gemma RMSNorm uses (1 + w)
    if name.endswith(".bias"):
        return 0.02 * t
    if name == EMBED or name.endswith("position_embedding.weight"):
        return 0.02 * t if name == EMBED else 0.3 * t
    if name.endswith("dense.weight"):
        return 0.2 * t / math.sqrt(shape[1])      # adaRMS modulation: scale/shift/gate near 0
    fan_in = 1
    for x in shape[1:]:
        fan_in *= x
    return t / math.sqrt(fan_in)


def make_checkpoint(out_dir, d, seed, dtype):
    """Write model.safetensors + config.json. The full size streams tensor by tensor (peak RSS ~ 1 tensor)."""
    os.makedirs(out_dir, exist_ok=True)
    shapes = checkpoint_shapes(d)
    gen = torch.Generator().manual_seed(seed)
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float32
    names = sorted(shapes)
    header, offset = {}, 0
    for name in names:
        n = 1
        for x in shapes[name]:
            n *= x
        nbytes = n * (2 if dtype == "bf16" else 4)
        header[name] = {"dtype": "BF16" if dtype == "bf16" else "F32", "shape": shapes[name],
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path = os.path.join(out_dir, "model.safetensors")
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for i, name in enumerate(names):
            shape = shapes[name]
            row = 1
            for x in shape[1:]:
                row *= x
            step = max(1, (1 << 24) // row)               # rows per chunk: ~16M values, bounded memory
            for r0 in range(0, shape[0], step):
                t = random_tensor(name, [min(step, shape[0] - r0)] + shape[1:], gen).to(tdt).contiguous()
                if tdt == torch.bfloat16:
                    t = t.view(torch.int16)
                f.write(t.numpy().tobytes())
            if (i + 1) % 50 == 0:
                print(f"checkpoint: {i + 1}/{len(names)} tensors", file=sys.stderr)
    os.replace(path + ".tmp", path)
    cfg = {"type": "pi05", "paligemma_variant": "gemma_2b", "action_expert_variant": "gemma_300m",
           "chunk_size": 50, "n_action_steps": 50, "max_state_dim": 32, "max_action_dim": 32,
           "num_inference_steps": 10, "min_period": d["min_period"], "max_period": d["max_period"],
           "image_resolution": [d["image"], d["image"]], "tokenizer_max_length": 200,
           "vision_config": {"hidden_size": d["v_width"], "num_hidden_layers": d["v_layers"],
                             "num_attention_heads": d["v_heads"], "intermediate_size": d["v_mlp"],
                             "patch_size": d["patch"], "image_size": d["image"],
                             "layer_norm_eps": d["v_eps"]},
           "text_config": {"hidden_size": d["l_width"], "num_hidden_layers": d["l_layers"],
                           "num_attention_heads": d["l_heads"], "num_key_value_heads": d["l_kv"],
                           "head_dim": d["head_dim"], "intermediate_size": d["l_mlp"],
                           "vocab_size": d["vocab"], "rms_norm_eps": d["eps"], "rope_theta": d["theta"]},
           "expert_config": {"hidden_size": d["e_width"], "num_hidden_layers": d["l_layers"],
                             "num_attention_heads": d["e_heads"], "num_key_value_heads": d["l_kv"],
                             "head_dim": d["head_dim"], "intermediate_size": d["e_mlp"],
                             "rms_norm_eps": d["eps"], "rope_theta": d["theta"]}}
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return path


def dims_from(tensors, cfg):
    """Dims from the tensor shapes plus the head counts and eps of config.json (as the Go loader does)."""
    vc, tc, ec = cfg.get("vision_config", {}), cfg.get("text_config", {}), cfg.get("expert_config", {})
    pe = tensors[VIS + "embeddings.patch_embedding.weight"]
    npos = tensors[VIS + "embeddings.position_embedding.weight"].shape[0]
    nv = sum(1 for k in tensors if k.startswith(VIS + "encoder.layers.") and k.endswith("layer_norm1.weight"))
    nl = sum(1 for k in tensors if k.startswith(LM + "layers.") and k.endswith("input_layernorm.weight"))
    hd = tc.get("head_dim", 256)
    return dict(image=int(math.isqrt(npos)) * pe.shape[2], patch=pe.shape[2], v_width=pe.shape[0], v_layers=nv,
                v_heads=vc.get("num_attention_heads", 16),
                v_mlp=tensors[VIS + "encoder.layers.0.mlp.fc1.weight"].shape[0],
                v_eps=vc.get("layer_norm_eps", 1e-6),
                l_width=tensors[EMBED].shape[1], l_layers=nl, l_heads=tc.get("num_attention_heads", 8),
                l_kv=tc.get("num_key_value_heads", 1), head_dim=hd,
                l_mlp=tensors[LM + "layers.0.mlp.gate_proj.weight"].shape[0], vocab=tensors[EMBED].shape[0],
                e_width=tensors["action_in_proj.weight"].shape[0],
                e_mlp=tensors[EX + "layers.0.mlp.gate_proj.weight"].shape[0],
                e_heads=ec.get("num_attention_heads", 8), eps=tc.get("rms_norm_eps", 1e-6),
                theta=tc.get("rope_theta", 10000.0),
                min_period=cfg.get("min_period", 4e-3), max_period=cfg.get("max_period", 4.0))


# ---------------------------------------------------------------- the model

def time_embedding(t, d):
    """The flow time t as lerobot embeds it: sin and cos of t at e_width/2 periods spaced
    geometrically from min_period to max_period, computed in float64, returned as float32."""
    half = d["e_width"] // 2
    frac = torch.linspace(0.0, 1.0, half, dtype=torch.float64)
    period = d["min_period"] * (d["max_period"] / d["min_period"]) ** frac
    a = (1.0 / period * 2 * math.pi) * torch.tensor(t, dtype=torch.float32).double()
    return torch.cat([torch.sin(a), torch.cos(a)]).float()


class Pi05:
    """pi0.5 inference for one request (batch 1), fp32 or bf16 (see the module doc)."""

    def __init__(self, tensors, d, bf16):
        self.t, self.d, self.bf16 = tensors, d, bf16
        self.cache = {}

    def w(self, name):
        return self.t[name].float()

    def lin(self, x, prefix, bias=True, fp32=False):
        """y = x W^T (+ b). bf16 mode: x and W rounded to bf16, torch bf16 matmul, fp32 bias add."""
        W = self.t[prefix + "weight"]
        b = self.t[prefix + "bias"].float() if bias else None
        if self.bf16 and not fp32:
            wb = self.cache.get(prefix)
            if wb is None:
                wb = self.cache[prefix] = W.to(torch.bfloat16)
            y = F.linear(x.to(torch.bfloat16), wb).float()
            return y + b if b is not None else y
        if W.dtype != torch.float32:
            W = self.cache.get(prefix + "f32")
            if W is None:
                W = self.cache[prefix + "f32"] = self.t[prefix + "weight"].float()
        return F.linear(x, W, b)

    def vision(self, images):
        """images [n, 3, S, S] in [-1, 1] -> image tokens [n, T, l_width]."""
        d = self.d
        pw = self.w(VIS + "embeddings.patch_embedding.weight")
        x = F.conv2d(images, pw, self.w(VIS + "embeddings.patch_embedding.bias"), stride=d["patch"])
        x = x.flatten(2).transpose(1, 2)                                   # [n, T, vw], patches row-major
        x = x + self.w(VIS + "embeddings.position_embedding.weight")[None]
        nh, hd = d["v_heads"], d["v_width"] // d["v_heads"]
        n, T, vw = x.shape
        for i in range(d["v_layers"]):
            p = VIS + f"encoder.layers.{i}."
            h = F.layer_norm(x, (vw,), self.w(p + "layer_norm1.weight"), self.w(p + "layer_norm1.bias"), d["v_eps"])
            q = self.lin(h, p + "self_attn.q_proj.").view(n, T, nh, hd).transpose(1, 2)
            k = self.lin(h, p + "self_attn.k_proj.").view(n, T, nh, hd).transpose(1, 2)
            v = self.lin(h, p + "self_attn.v_proj.").view(n, T, nh, hd).transpose(1, 2)
            a = torch.softmax((q @ k.transpose(-1, -2)) * hd ** -0.5, dim=-1) @ v
            x = x + self.lin(a.transpose(1, 2).reshape(n, T, vw), p + "self_attn.out_proj.")
            h = F.layer_norm(x, (vw,), self.w(p + "layer_norm2.weight"), self.w(p + "layer_norm2.bias"), d["v_eps"])
            x = x + self.lin(F.gelu(self.lin(h, p + "mlp.fc1."), approximate="tanh"), p + "mlp.fc2.")
        x = F.layer_norm(x, (vw,), self.w(VIS + "post_layernorm.weight"), self.w(VIS + "post_layernorm.bias"),
                         d["v_eps"])
        return self.lin(x, PROJ)

    def rms(self, x, eps):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    def rope(self, x, pos):
        """x [heads, T, hd], pos [T] -> rotate-half RoPE with fp32 angles."""
        hd = x.shape[-1]
        inv = self.d["theta"] ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)
        ang = pos.float()[:, None] * inv[None, :]
        cos, sin = torch.cos(ang), torch.sin(ang)
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def attend(self, q, k, v, allowed):
        """q [H, Tq, hd], k/v [KV, Tk, hd], allowed [Tq, Tk] -> [Tq, H*hd]; fp32 softmax, additive mask."""
        H, KV, hd = q.shape[0], k.shape[0], q.shape[-1]
        k = k.repeat_interleave(H // KV, dim=0)
        v = v.repeat_interleave(H // KV, dim=0)
        s = (q @ k.transpose(-1, -2)) * hd ** -0.5
        s = s + torch.where(allowed, 0.0, MASK_VALUE)[None]
        return (torch.softmax(s, dim=-1) @ v).transpose(0, 1).reshape(q.shape[1], H * hd)

    def prefix(self, img_tokens, img_masks, tokens, tok_masks):
        """The padded prefix exactly as lerobot runs it. Returns per-layer K (after RoPE) and V
        [layers, KV, P, hd], and the prefix pad mask [P]."""
        d = self.d
        T = img_tokens.shape[1]
        table = self.t[EMBED]
        if self.bf16:                                         # the embedding is a bf16 table in lerobot's bf16 run
            table = table.to(torch.bfloat16)
        emb = table[tokens].float() * math.sqrt(d["l_width"])
        x = torch.cat([img_tokens.reshape(-1, d["l_width"]), emb], 0)
        pad = torch.cat([img_masks.repeat_interleave(T), tok_masks])
        pos = torch.cumsum(pad.long(), 0) - 1
        allowed = pad[None, :] & pad[:, None]                 # all ar = 0: bidirectional among valid tokens
        H, KV, hd, P = d["l_heads"], d["l_kv"], d["head_dim"], x.shape[0]
        Ks, Vs = [], []
        for i in range(d["l_layers"]):
            p = LM + f"layers.{i}."
            h = self.rms(x, d["eps"]) * (1 + self.w(p + "input_layernorm.weight"))
            q = self.rope(self.lin(h, p + "self_attn.q_proj.", bias=False).view(P, H, hd).transpose(0, 1), pos)
            k = self.rope(self.lin(h, p + "self_attn.k_proj.", bias=False).view(P, KV, hd).transpose(0, 1), pos)
            v = self.lin(h, p + "self_attn.v_proj.", bias=False).view(P, KV, hd).transpose(0, 1)
            Ks.append(k)
            Vs.append(v)
            x = x + self.lin(self.attend(q, k, v, allowed), p + "self_attn.o_proj.", bias=False)
            h = self.rms(x, d["eps"]) * (1 + self.w(p + "post_attention_layernorm.weight"))
            g = F.gelu(self.lin(h, p + "mlp.gate_proj.", bias=False), approximate="tanh")
            x = x + self.lin(g * self.lin(h, p + "mlp.up_proj.", bias=False), p + "mlp.down_proj.", bias=False)
        return torch.stack(Ks), torch.stack(Vs), pad

    def time_cond(self, t):
        emb = time_embedding(t, self.d)
        c = F.silu(self.lin(emb, "time_mlp_in.", fp32=True))
        return F.silu(self.lin(c, "time_mlp_out.", fp32=True))

    def ada(self, x, cond, prefix):
        scale, shift, gate = self.lin(cond, prefix + "dense.", fp32=True).chunk(3, dim=-1)
        return self.rms(x, self.d["eps"]) * (1 + scale) + shift, gate

    def velocity(self, x_t, t, Ks, Vs, pad):
        d = self.d
        Hh, KV, hd = d["e_heads"], d["l_kv"], d["head_dim"]
        n = x_t.shape[0]
        cond = self.time_cond(t)
        h = self.lin(x_t, "action_in_proj.", fp32=True)
        pos = pad.long().sum() + torch.arange(n)
        # suffix rows see every valid prefix key and every suffix key (ar = [1, 0, ...])
        allowed = torch.cat([pad[None, :].expand(n, -1), torch.ones(n, n, dtype=torch.bool)], 1)
        for i in range(d["l_layers"]):
            p = EX + f"layers.{i}."
            y, gate = self.ada(h, cond, p + "input_layernorm.")
            q = self.rope(self.lin(y, p + "self_attn.q_proj.", bias=False).view(n, Hh, hd).transpose(0, 1), pos)
            k = self.rope(self.lin(y, p + "self_attn.k_proj.", bias=False).view(n, KV, hd).transpose(0, 1), pos)
            v = self.lin(y, p + "self_attn.v_proj.", bias=False).view(n, KV, hd).transpose(0, 1)
            a = self.attend(q, torch.cat([Ks[i], k], 1), torch.cat([Vs[i], v], 1), allowed)
            h = h + self.lin(a, p + "self_attn.o_proj.", bias=False) * gate
            y, gate = self.ada(h, cond, p + "post_attention_layernorm.")
            g = F.gelu(self.lin(y, p + "mlp.gate_proj.", bias=False), approximate="tanh")
            h = h + self.lin(g * self.lin(y, p + "mlp.up_proj.", bias=False), p + "mlp.down_proj.", bias=False) * gate
        y, _ = self.ada(h, cond, EX + "norm.")
        return self.lin(y, "action_out_proj.", fp32=True)

    def sample(self, noise, steps, Ks, Vs, pad):
        x = noise.clone()
        dt = -1.0 / steps
        for s in range(steps):
            x = x + dt * self.velocity(x, 1.0 + s * dt, Ks, Vs, pad)
        return x

    def run(self, images, img_masks, tokens, tok_masks, noise, steps):
        img = self.vision(images)
        Ks, Vs, pad = self.prefix(img, img_masks, tokens, tok_masks)
        return img, Ks, Vs, pad, self.sample(noise, steps, Ks, Vs, pad)


# ---------------------------------------------------------------- goldens

# name, cameras, camera mask, real prompt tokens, token buffer, horizon, steps
CASES = [
    ("c1_t20_h50_s10", 1, [1], 20, 32, 50, 10),
    ("c2_t50_h50_s5", 2, [1, 1], 50, 64, 50, 5),
    ("c3_mid_masked_t100_h20_s10", 3, [1, 0, 1], 100, 128, 20, 10),
    ("c3_t200_h50_s5", 3, [1, 1, 1], 200, 224, 50, 5),
    ("c2_t150_h64_s10", 2, [1, 1], 150, 160, 64, 10),
    ("c4_first_masked_t90_h32_s5", 4, [0, 1, 1, 1], 90, 96, 32, 5),
]


def golden_case(model32, model16, d, case, gen):
    name, ncam, cmask, ntok, tlen, horizon, steps = case
    S = d["image"]
    images = torch.rand(ncam, 3, S, S, generator=gen) * 2 - 1
    img_masks = torch.tensor(cmask, dtype=torch.bool)
    images[~img_masks] = -1.0                              # a missing camera: an image of -1, mask false
    tokens = torch.zeros(tlen, dtype=torch.int32)
    tokens[0] = 2                                          # BOS
    tokens[1:ntok] = torch.randint(3, d["vocab"], (ntok - 1,), generator=gen, dtype=torch.int32)
    tok_masks = torch.arange(tlen) < ntok
    noise = torch.randn(horizon, ACTION_DIM, generator=gen)
    out = {"images": images, "image_masks": img_masks.to(torch.uint8), "tokens": tokens,
           "token_masks": tok_masks.to(torch.uint8), "noise": noise,
           "steps": torch.tensor([steps], dtype=torch.int32)}
    with torch.no_grad():
        img, Ks, Vs, pad, act = model32.run(images, img_masks, tokens.long(), tok_masks, noise, steps)
        _, _, _, _, act16 = model16.run(images, img_masks, tokens.long(), tok_masks, noise, steps)
    out["image_tokens"] = img[img_masks].reshape(-1, img.shape[-1]).contiguous()   # valid cameras only
    out["prefix_k"] = Ks[:, :, pad, :].contiguous()                              # valid prefix rows only
    out["prefix_v"] = Vs[:, :, pad, :].contiguous()
    out["actions"] = act.contiguous()
    out["actions_bf16"] = act16.contiguous()
    return name, out


def goldens(out_dir, seed):
    ck = os.path.join(out_dir, "tiny")
    make_checkpoint(ck, TINY, seed, "f32")
    tensors = load_safetensors(os.path.join(ck, "model.safetensors"))
    with open(os.path.join(ck, "config.json")) as f:
        d = dims_from(tensors, json.load(f))
    m32, m16 = Pi05(tensors, d, False), Pi05(tensors, d, True)
    gen = torch.Generator().manual_seed(seed + 1)
    for case in CASES:
        name, out = golden_case(m32, m16, d, case, gen)
        save_safetensors(os.path.join(out_dir, name + ".safetensors"), out)
        diff = (out["actions"] - out["actions_bf16"]).abs().max().item()
        print(f"golden {name}: prefix {out['prefix_k'].shape[2]} valid rows, |fp32-bf16| max {diff:.3g}",
              file=sys.stderr)


def golden_for(args):
    """One golden case on any checkpoint (e.g. a full-width one), for TestPi05ExternalGolden."""
    torch.set_num_threads(args.threads)
    tensors = load_safetensors(os.path.join(args.weights, "model.safetensors"))
    with open(os.path.join(args.weights, "config.json")) as f:
        d = dims_from(tensors, json.load(f))
    mask = [int(x) for x in args.camera_mask.split(",")]
    case = ("external", len(mask), mask, args.tokens, args.buffer, args.horizon, args.steps)
    _, out = golden_case(Pi05(tensors, d, False), Pi05(tensors, d, True), d, case,
                         torch.Generator().manual_seed(args.seed))
    save_safetensors(args.out, out)
    print(f"golden {args.out}: prefix {out['prefix_k'].shape[2]} valid rows", file=sys.stderr)


# ---------------------------------------------------------------- an HTTP request golden

def resize_with_pad(img, size):
    """HxWx3 uint8 -> [3, size, size] in [-1, 1], as lerobot/openpi pre-process a camera frame:
    bilinear resize keeping the aspect ratio (align_corners=False, no antialias) unless the frame
    already has the size, clamp, centred zero padding, then x*2-1 (so padding is -1)."""
    h, w = img.shape[:2]
    x = img.permute(2, 0, 1)[None].to(torch.float32) / 255.0
    if (h, w) != (size, size):
        ratio = max(w / size, h / size)
        rh, rw = int(h / ratio), int(w / ratio)
        x = F.interpolate(x, size=(rh, rw), mode="bilinear", align_corners=False).clamp(0.0, 1.0)
        top, left = (size - rh) // 2, (size - rw) // 2
        x = F.pad(x, (left, size - rw - left, top, size - rh - top), mode="constant", value=0.0)
    return (x * 2.0 - 1.0)[0]


def request_golden(args):
    """One request as a client sends it (camera frames as HxWx3 uint8 arrays, pre-tokenized prompt
    ids with BOS, the initial noise, the step count) and the actions of the fp32 and bf16 runs, for
    the end-to-end tests of the served pi0.5 package (runner/pi05_e2e_test.go). The frames have
    different sizes so that one is resized and padded."""
    torch.set_num_threads(args.threads)
    tensors = load_safetensors(os.path.join(args.weights, "model.safetensors"))
    with open(os.path.join(args.weights, "config.json")) as f:
        d = dims_from(tensors, json.load(f))
    gen = torch.Generator().manual_seed(args.seed)
    sizes = [(d["image"], d["image"]), (40, 64)][:args.cams]
    frames = [torch.randint(0, 256, (h, w, 3), generator=gen, dtype=torch.uint8) for h, w in sizes]
    images = torch.stack([resize_with_pad(f, d["image"]) for f in frames])
    img_masks = torch.ones(len(frames), dtype=torch.bool)
    tokens = torch.cat([torch.tensor([2]), torch.randint(3, d["vocab"], (args.tokens - 1,), generator=gen)])
    tok_masks = torch.ones(args.tokens, dtype=torch.bool)
    noise = torch.randn(args.horizon, ACTION_DIM, generator=gen)
    with torch.no_grad():
        act = Pi05(tensors, d, False).run(images, img_masks, tokens, tok_masks, noise, args.steps)[-1]
        act16 = Pi05(tensors, d, True).run(images, img_masks, tokens, tok_masks, noise, args.steps)[-1]
    out = {
        "about": "pi0.5 request golden: tools/reference/pi05.py request --weights " + args.weights,
        "request": {"images": [f.tolist() for f in frames], "tokens": tokens.tolist(),
                    "noise": noise.tolist(), "num_steps": args.steps},
        "actions": act.tolist(), "actions_bf16": act16.tolist(),
    }
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    diff = (act - act16).abs().max().item()
    print(f"request golden {args.out}: |fp32-bf16| max {diff:.3g}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("checkpoint")
    c.add_argument("--out", required=True)
    c.add_argument("--full", action="store_true")
    c.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--vision-layers", type=int, help="override the vision depth (a full-width, shallower bench model)")
    c.add_argument("--layers", type=int, help="override the prefix/expert depth")
    g = sub.add_parser("goldens")
    g.add_argument("--out", required=True)
    g.add_argument("--seed", type=int, default=1234)
    e = sub.add_parser("golden")
    e.add_argument("--weights", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--camera-mask", default="0,1", help="one 0/1 per camera")
    e.add_argument("--tokens", type=int, default=20, help="real prompt tokens")
    e.add_argument("--buffer", type=int, default=32, help="token buffer (the prompt bucket)")
    e.add_argument("--horizon", type=int, default=20)
    e.add_argument("--steps", type=int, default=3)
    e.add_argument("--seed", type=int, default=7)
    e.add_argument("--threads", type=int, default=2)
    r = sub.add_parser("request")
    r.add_argument("--weights", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--cams", type=int, default=2, choices=[1, 2])
    r.add_argument("--tokens", type=int, default=20, help="prompt ids, BOS included")
    r.add_argument("--horizon", type=int, default=50)
    r.add_argument("--steps", type=int, default=10)
    r.add_argument("--seed", type=int, default=21)
    r.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.cmd == "checkpoint":
        d = dict(FULL if args.full else TINY)
        if args.vision_layers:
            d["v_layers"] = args.vision_layers
        if args.layers:
            d["l_layers"] = args.layers
        make_checkpoint(args.out, d, args.seed, args.dtype)
    elif args.cmd == "goldens":
        goldens(args.out, args.seed)
    elif args.cmd == "golden":
        golden_for(args)
    else:
        request_golden(args)


if __name__ == "__main__":
    main()
