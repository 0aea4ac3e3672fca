"""A small model server of kind http-server, for tt-model's tests.

Standard library only. It logs a JSON "ready" event once it listens (the manifest's
runtime.ready_line), answers GET /health and echoes POST /v1/echo with what the launch gave
it: its argv, the variables tt-model derives from the profile, and the weights folder.
"""
import argparse
import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def launch_facts(args):
    weights = os.environ.get("HF_MODEL", "")
    return {
        "argv": sys.argv[1:],
        "greeting": args.greeting,
        "env": {k: os.environ.get(k) for k in ("HF_MODEL", "MESH_DEVICE", "TT_MESH_SHAPE", "ECHO_GREETING")},
        "weights_files": sorted(os.listdir(weights)) if os.path.isdir(weights) else None,
        "cwd": os.getcwd(),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--greeting", default="hi")
    args = parser.parse_args()

    class Handler(BaseHTTPRequestHandler):
        def reply(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                self.reply(200, {"status": "ok"})
            else:
                self.reply(404, {"error": "no route " + self.path})

        def do_POST(self):
            if self.path != "/v1/echo":
                self.reply(404, {"error": "no route " + self.path})
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                request = json.loads(body or b"{}")
            except ValueError as e:
                self.reply(400, {"error": "body is not JSON: %s" % e})
                return
            self.reply(200, {"echo": request, "launch": launch_facts(args)})

        def log_message(self, fmt, *a):
            print(json.dumps({"event": "request", "line": fmt % a}), flush=True)

    # A clean exit on `docker stop` (SIGTERM), as a server that closes its device would.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(json.dumps({"event": "ready", "port": args.port}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
