#!/usr/bin/python3
"""A fake GCE/GKE metadata server for shardfs' credential tests.

Listens on 127.0.0.1 (a free port, written to --port-file once it listens)
and answers GET /computeMetadata/v1/instance/service-accounts/default/token
as the real one does: only with the request header Metadata-Flavor: Google
(else HTTP 403), a reply carrying Metadata-Flavor: Google and
{"access_token": "ya29.fake-md-N-RANDOM", "expires_in": --expires-in,
"token_type": "Bearer"}. Anything else is 404. Every request adds one JSON
line to --log: {"n", "path", "flavor", "token"}, flushed before the answer.
--no-flavor leaves Metadata-Flavor out of the replies, as a server that is
not a metadata server would (shardfs must refuse its token);
--no-account answers the token path 404, as on a VM without a service
account.

Point shardfs at it with GCE_METADATA_HOST=127.0.0.1:PORT. Stdlib only.
"""
import argparse
import json
import os
import secrets
import threading
import http.server

TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--expires-in", type=int, default=3600)
    ap.add_argument("--no-flavor", action="store_true")
    ap.add_argument("--no-account", action="store_true")
    args = ap.parse_args()
    lock = threading.Lock()
    log = open(args.log, "a", buffering=1)
    count = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def answer(self, status, body, ctype="application/json"):
            data = body.encode()
            self.send_response(status)
            if not args.no_flavor:
                self.send_header("Metadata-Flavor", "Google")
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            flavor = self.headers.get("Metadata-Flavor")
            token = None
            with lock:
                count[0] += 1
                if (self.path == TOKEN_PATH and flavor == "Google"
                        and not args.no_account):
                    token = "ya29.fake-md-%d-%s" % (count[0],
                                                    secrets.token_hex(12))
                log.write(json.dumps({"n": count[0], "path": self.path,
                                      "flavor": flavor,
                                      "token": token}) + "\n")
                log.flush()
            if self.path != TOKEN_PATH or args.no_account:
                self.answer(404, "not found", "text/plain")
            elif flavor != "Google":
                self.answer(403, "Missing Metadata-Flavor:Google header.",
                            "text/plain")
            else:
                self.answer(200, json.dumps({
                    "access_token": token, "expires_in": args.expires_in,
                    "token_type": "Bearer"}))

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
