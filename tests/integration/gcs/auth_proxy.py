#!/usr/bin/python3
"""A recording HTTP proxy for shardfs' credential tests: server-side
evidence of the Authorization header the GCS backend sends (the emulator
ignores it).

Listens on 127.0.0.1 (a free port, written to --port-file once it listens),
forwards every request to one upstream (the GCS emulator) without its
Authorization header, relays the answer, and appends one line per request,
"METHOD PATH STATUS AUTH" (AUTH: the header as sent, "-" if none), to --log,
flushed before the answer is sent.

    auth_proxy.py --upstream 127.0.0.1:PORT --log FILE --port-file FILE

Stdlib only. Keep-alive on both sides (libcurl reuses connections).
"""
import argparse
import http.client
import http.server
import os
import threading

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding",
       "te", "trailer", "upgrade", "authorization"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    host, port = args.upstream.rsplit(":", 1)
    lock = threading.Lock()
    log = open(args.log, "a", buffering=1)
    local = threading.local()

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

        def relay(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            auth = self.headers.get("Authorization") or "-"
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
                    c.close()
                    local.conn = None
                    if attempt:
                        self.send_error(502)
                        return
            with lock:
                log.write("%s %s %d %s\n" % (self.command, self.path,
                                             r.status, auth))
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
            if not head:
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
