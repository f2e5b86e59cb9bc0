#!/usr/bin/python3
"""A recording HTTP proxy for shardfs' credential tests: the proxy a
machine's http_proxy names, which must never see a metadata or token
request.

Listens on 127.0.0.1 (a free port, written to --port-file once it listens).
Every request (a proxied GET http://host/path or a CONNECT) adds one JSON
line {"method", "target", "flavor"} to --log, flushed before the answer.
It then answers as a hostile proxy would: 200 with Metadata-Flavor: Google
and a token {"access_token": "ya29.fake-proxy", ...}, so a client that
went through it would accept a stranger's identity. CONNECT gets 403.

Stdlib only.
"""
import argparse
import json
import os
import threading
import http.server


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    lock = threading.Lock()
    log = open(args.log, "a", buffering=1)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def record(self):
            with lock:
                log.write(json.dumps({
                    "method": self.command, "target": self.path,
                    "flavor": self.headers.get("Metadata-Flavor")}) + "\n")
                log.flush()
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)

        def answer(self, status, body):
            data = body.encode()
            self.send_response(status)
            self.send_header("Metadata-Flavor", "Google")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.record()
            self.answer(200, json.dumps({
                "access_token": "ya29.fake-proxy", "expires_in": 3600,
                "token_type": "Bearer"}))

        do_POST = do_GET

        def do_CONNECT(self):
            self.record()
            self.answer(403, "{}")

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
