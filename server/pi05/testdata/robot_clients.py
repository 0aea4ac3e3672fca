#!/usr/bin/python3
"""Robot clients of tt-model-server's pi0.5 protocols, written from the public protocol descriptions
only (OpenPI's websocket policy protocol with msgpack-numpy, SGLang's action API), with Debian's
python3-msgpack and python3-websockets (10.x asyncio API) and the standard library: no numpy, so
arrays are packed exactly as the wire format says (BIN keys __ndarray__, data, dtype, shape).

Every client sends the same observation and noise; each must get the JSON API's actions bit for bit.
Usage: robot_clients.py http://127.0.0.1:PORT [HORIZON]   (prints one JSON line per check; exit 1 on a
mismatch). HORIZON is the server's PI05_ACTION_HORIZON (default 10, the Go tests' server).
"""

import array
import asyncio
import json
import math
import struct
import sys
import urllib.request

import msgpack
import websockets

H_ACT = int(sys.argv[2]) if len(sys.argv) > 2 else 10  # the server's PI05_ACTION_HORIZON
D_ACT = 32  # the padded action dim


class NDArray:
    """A decoded msgpack-numpy array: raw C-order bytes, dtype string, shape."""

    def __init__(self, data, dtype, shape):
        self.data, self.dtype, self.shape = data, dtype, list(shape)


def nd(data, dtype, shape):
    return {b"__ndarray__": True, b"data": bytes(data), b"dtype": dtype, b"shape": list(shape)}


def f32(values, shape):
    return nd(array.array("f", values).tobytes(), "<f4", shape)


def unpack_hook(obj):
    if b"__ndarray__" in obj:
        return NDArray(obj[b"data"], obj[b"dtype"], obj[b"shape"])
    if b"__npgeneric__" in obj:
        return obj[b"data"]
    return obj


def packb(obj):
    return msgpack.packb(obj, use_bin_type=True)


def unpackb(data):
    return msgpack.unpackb(data, object_hook=unpack_hook, raw=False)


def frame(w, h, salt):
    """The test frame: HxWx3 uint8 bytes and the same as nested lists."""
    pix = bytearray()
    rows = []
    for y in range(h):
        row = []
        for x in range(w):
            px = [(x * 5 + y * 11 + c * 70 + salt) % 256 for c in range(3)]
            pix.extend(px)
            row.append(px)
        rows.append(row)
    return bytes(pix), rows


def chw(pix, w, h):
    """HxWx3 bytes to 3xHxW (ALOHA's layout)."""
    out = bytearray(len(pix))
    for c in range(3):
        for y in range(h):
            for x in range(w):
                out[(c * h + y) * w + x] = pix[(y * w + x) * 3 + c]
    return bytes(out)


BASE = (33, 21, 3)  # w, h, salt
WRIST = (16, 16, 9)
TASK = "open the drawer"
STATE = array.array("f", [0.3, -0.7])
NOISE = array.array("f", [(i % 7 - 3) / 3 for i in range(H_ACT * D_ACT)])


def bits(actions):
    """Actions as the bytes of little-endian float32 values."""
    if isinstance(actions, NDArray):
        if actions.dtype != "<f4" or actions.shape != [H_ACT, D_ACT]:
            raise AssertionError(f"actions {actions.dtype} {actions.shape}")
        return actions.data
    flat = [v for row in actions for v in row]
    return struct.pack(f"<{len(flat)}f", *flat)


def post(url, body, headers):
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.headers.get("Content-Type"), resp.read()


def json_reference(base):
    (bpix, brows), (wpix, wrows) = frame(*BASE), frame(*WRIST)
    body = {
        "input": {
            "task": TASK,
            "observation": {
                "images": {"base": brows, "wrist": wrows},
                "state": list(STATE),
                "noise": [list(NOISE[r * D_ACT:(r + 1) * D_ACT]) for r in range(H_ACT)],
            },
        }
    }
    ctype, raw = post(base + "/v1/actions/generations", json.dumps(body).encode(), {"Content-Type": "application/json"})
    env = json.loads(raw)
    return bits(env["data"][0]["action"]["values"])


def sglang_envelope(raw_format):
    (bpix, _), (wpix, _) = frame(*BASE), frame(*WRIST)
    runtime = {"return_timing": True, "prefix_cache": False}
    if raw_format:
        runtime["response_format"] = "raw"
    return {
        "input": {
            "task": TASK,
            "observation": {
                "images": {
                    "base": nd(bpix, "|u1", (BASE[1], BASE[0], 3)),
                    "wrist": nd(wpix, "|u1", (WRIST[1], WRIST[0], 3)),
                },
                "state": f32(STATE, (2,)),
                "noise": f32(NOISE, (H_ACT, D_ACT)),
            },
        },
        "runtime": runtime,
    }


def observations():
    """The observation in each robot family's keys (the tiny checkpoint names no cameras: its slots
    are base then wrist)."""
    (bpix, _), (wpix, _) = frame(*BASE), frame(*WRIST)
    noise = f32(NOISE, (H_ACT, D_ACT))
    state = f32(STATE, (2,))
    bhwc = nd(bpix, "|u1", (BASE[1], BASE[0], 3))
    whwc = nd(wpix, "|u1", (WRIST[1], WRIST[0], 3))
    return {
        "sglang": {"task": TASK, "observation.images.base": bhwc, "observation.images.wrist": whwc,
                   "observation.state": state, "noise": noise},
        "libero": {"prompt": TASK, "observation/image": bhwc, "observation/wrist_image": whwc,
                   "observation/state": state, "noise": noise},
        "droid": {"prompt": TASK, "observation/exterior_image_1_left": bhwc, "observation/wrist_image_left": whwc,
                  "observation/joint_position": f32(STATE[:1], (1,)),
                  # a numpy scalar, as DROID clients may send the gripper
                  "observation/gripper_position": {b"__npgeneric__": True, b"data": float(STATE[1]), b"dtype": "<f4"},
                  "noise": noise},
        "aloha": {"prompt": TASK, "state": state, "noise": noise, "images": {
            "cam_high": nd(chw(bpix, BASE[0], BASE[1]), "|u1", (3, BASE[1], BASE[0])),
            "cam_left_wrist": nd(chw(wpix, WRIST[0], WRIST[1]), "|u1", (3, WRIST[1], WRIST[0])),
            "cam_low": nd(bytes(3 * 4 * 4), "|u1", (3, 4, 4)),  # not a pi0.5 input: ignored
        }},
    }


def close_of(exc):
    return exc.code, exc.reason


async def openpi(uri, want, report):
    # As openpi_client.WebsocketClientPolicy: no compression, no size limit, metadata first.
    async with websockets.connect(uri, compression=None, max_size=None) as ws:
        meta = unpackb(await ws.recv())
        report("openpi metadata", meta.get("object") == "action.metadata" and "camera_keys" in meta["websocket"]["openpi"])
        for family, obs in observations().items():
            await ws.send(packb(obs))
            reply = await ws.recv()
            if isinstance(reply, str):
                report(f"openpi {family}", False, reply)
                return
            reply = unpackb(reply)
            report(f"openpi {family}", bits(reply["actions"]) == want and "infer_ms" in reply["server_timing"])
        bad = dict(observations()["sglang"], **{"observation.state": f32([0.5, math.nan], (2,))})
        await ws.send(packb(bad))
        text = await ws.recv()
        try:
            await ws.recv()
            report("openpi error close", False, "no close after the error frame")
        except websockets.exceptions.ConnectionClosed as exc:
            code, reason = close_of(exc)
            report("openpi error close", isinstance(text, str) and "state[1] is NaN" in text and code == 1011
                   and reason == "Internal server error. Traceback included in previous frame.", f"{text!r} {code} {reason!r}")


async def realtime(uri, want, report):
    async with websockets.connect(uri, compression=None, max_size=None) as ws:
        meta = unpackb(await ws.recv())
        report("realtime metadata", meta.get("object") == "action.metadata")
        for i in range(2):
            await ws.send(packb(sglang_envelope(False)))
            env = unpackb(await ws.recv())
            ok = env["object"] == "action.generation" and bits(env["data"][0]["action"]["values"]) == want
            report(f"realtime request {i}", ok and (i == 0) == ("prev_total_ms" not in env["server_timing"]))


def main():
    base = sys.argv[1].rstrip("/")
    failures = []

    def report(name, ok, detail=""):
        print(json.dumps({"check": name, "ok": bool(ok), "detail": str(detail)}))
        if not ok:
            failures.append(name)

    want = json_reference(base)
    for raw_format in (False, True):
        ctype, raw = post(base + "/v1/actions/generations", packb(sglang_envelope(raw_format)),
                          {"Content-Type": "application/msgpack", "Accept": "application/msgpack"})
        out = unpackb(raw)
        got = out["actions"] if raw_format else out["data"][0]["action"]["values"]
        report(f"sglang msgpack http ({'raw' if raw_format else 'envelope'})", ctype == "application/msgpack" and bits(got) == want)
    with urllib.request.urlopen(base + "/healthz", timeout=10) as resp:
        report("openpi healthz", resp.status == 200 and resp.read() == b"OK\n")
    ws = "ws" + base[len("http"):]
    asyncio.run(openpi(ws, want, report))  # the root path, where stock OpenPI clients connect
    asyncio.run(openpi(ws + "/openpi/policy", want, report))
    asyncio.run(realtime(ws + "/v1/actions/realtime", want, report))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
