#!/usr/bin/python3
"""A counting HTTP proxy for the cache tests: server-side evidence of what
shardfs fetched.

Listens on 127.0.0.1, forwards every request unchanged (method, path,
headers, body) to one upstream (s3rver) and relays the answer; appends one
line per request, "METHOD PATH STATUS BYTES CONN" (BYTES: the body's
length; CONN: the client connection it came on, numbered from 1) to the
log file, flushed before the answer is sent, so a test that has read a
file sees its GETs counted.

    countproxy.py --upstream 127.0.0.1:PORT --log FILE --port-file FILE
                  [--delay-ms N] [--hold TEXT --release FILE]

--delay-ms: every request waits N ms before it is forwarded (a store with
first-byte latency). --hold: the first GET whose path contains TEXT waits
until FILE exists (at most 120 s) before it is forwarded: one slow reply,
for the hedged-read test (test_hedge.sh). Either logs as usual once
answered.

Stdlib only. Keep-alive on both sides (libcurl reuses connections).
"""
import argparse
import http.client
import http.server
import os
import threading
import time

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding",
       "te", "trailer", "upgrade"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--delay-ms", type=int, default=0)
    ap.add_argument("--hold")
    ap.add_argument("--release")
    args = ap.parse_args()
    held = [False]
    host, port = args.upstream.rsplit(":", 1)
    lock = threading.Lock()
    log = open(args.log, "a", buffering=1)
    local = threading.local()
    conns = [0]

    def upstream():
        c = getattr(local, "conn", None)
        if c is None:
            c = http.client.HTTPConnection(host, int(port), timeout=60)
            local.conn = c
        return c

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def setup(self):  # once per client connection
            super().setup()
            with lock:
                conns[0] += 1
                self.conn_id = conns[0]

        def relay(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            if args.delay_ms:
                time.sleep(args.delay_ms / 1000.0)
            if args.hold and self.command == "GET" and args.hold in self.path:
                with lock:
                    first = not held[0]
                    held[0] = True
                if first:
                    end = time.monotonic() + 120
                    while (not os.path.exists(args.release)
                           and time.monotonic() < end):
                        time.sleep(0.02)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in HOP}
            for attempt in range(2):
                c = upstream()
                try:
                    c.request(self.command, self.path, body=body,
                              headers=headers)
                    r = c.getresponse()
                    data = r.read()
                    break
                except (http.client.HTTPException, OSError):
                    # s3rver closes idle connections: retry once on a new one.
                    c.close()
                    local.conn = None
                    if attempt:
                        self.send_error(502)
                        return
            with lock:
                log.write("%s %s %d %d %d\n" % (self.command, self.path,
                                                 r.status, len(data),
                                                 self.conn_id))
                log.flush()
            self.send_response(r.status)
            head = self.command == "HEAD"
            for k, v in r.getheaders():
                if k.lower() in HOP:
                    continue
                if k.lower() == "content-length" and not head:
                    continue
                self.send_header(k, v)
            if not head:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = relay

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
