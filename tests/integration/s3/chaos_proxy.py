#!/usr/bin/python3
"""An HTTP/1.1 proxy in front of s3rver that breaks object replies the ways
real stores, proxies and networks do, for test_faults.sh. Binds 127.0.0.1.

    chaos_proxy.py PORT_FILE LOG_FILE UPSTREAM_PORT

Writes its port to PORT_FILE once listening. Every request is forwarded to
s3rver on 127.0.0.1:UPSTREAM_PORT (s3rver checks only the signature's key
id, so forwarding keeps requests valid). Object GETs are then broken, at
the rate set through the control path, with one of the enabled faults:

  503             503 SlowDown instead of the reply
  reset           headers and half the body, then a TCP reset
  short_honest    half the body, framed honestly (Content-Length and
                  Content-Range say the shorter length)
  short_dishonest half the body under the full Content-Length, then close
  cl_short        Content-Length half the body, the whole body sent (the
                  rest stays on the kept-alive connection)
  cl_long         Content-Length longer than the body, then close
  cr_early        a 206 for a range starting before the one asked for
  cr_late         a 206 for a range starting after the one asked for
  cr_missing      a 206 without Content-Range
  cr_total        a 206 whose Content-Range total is wrong
  stall_headers   nothing for STALL seconds, then close
  stall_body      headers and half the body, nothing for STALL s, close
  trickle         headers, then 2 bytes a second
  surplus         the right reply followed by garbage on the connection
  flip            one bit of the body flipped, framing honest
  ignore_range    200 with the whole object (legal: not a fault to fail)
  no_etag         the reply without its ETag (its version cannot be told)
  cr_junk         a 206 whose Content-Range has junk after the total
  extra_now       the right reply and, in the same write, a second
                  complete reply with the same headers and a body of
                  zeros, as if for a request not yet sent (a store or
                  proxy answering twice): the kept-alive connection
                  carries it to whatever request comes next
  extra_next      the same, the second reply in a write of its own right
                  after the first
  extra_late      the same, the second reply EXTRA_MS (5) ms after the
                  first

Listing GETs get 503 or one of the listing faults (object GETs never):
  list_loop       a truncated page whose continuation token never changes
  list_spin       a truncated page with a new token every time, same keys
  list_endless    a truncated page with a new token every time, and every
                  key renamed for that page (KEY.pN): a listing that never
                  repeats itself and never ends
Control (not forwarded):
  GET /__chaos/set?faults=a,b&rate=0.1&stall=30   enable faults
  GET /__chaos/stats                              JSON counts per fault
  GET /__chaos/strays     {"begun": B, "written": W}: extra_* replies
                          begun, and those whose stray reply's first
                          bytes are sent
Each request appends "METHOD PATH RANGE -> FAULT" to LOG_FILE.
"""
import http.client
import http.server
import json
import os
import random
import re
import socket
import struct
import sys
import threading
import time
import urllib.parse

FAULTS = ("503 reset short_honest short_dishonest cl_short cl_long cr_early "
          "cr_late cr_missing cr_total stall_headers stall_body trickle "
          "surplus flip ignore_range no_etag cr_junk extra_now extra_next "
          "extra_late list_loop list_spin list_endless").split()
EXTRA_MS = 5
SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown'
            b"</Code><Message>Please reduce your request rate.</Message>"
            b"</Error>")


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.faults = []
        self.rate = 0.0
        self.stall = 30.0
        self.rng = random.Random(1)
        self.counts = {}
        self.strays_begun = self.strays_written = 0

    def pick(self):
        with self.lock:
            if not self.faults or self.rng.random() >= self.rate:
                return None
            f = self.rng.choice(self.faults)
            self.counts[f] = self.counts.get(f, 0) + 1
            return f


def main():
    port_file, log_file, upstream = sys.argv[1], sys.argv[2], int(sys.argv[3])
    st = State()
    log_lock = threading.Lock()
    local = threading.local()

    def upstream_request(method, path, headers):
        for attempt in range(2):
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = http.client.HTTPConnection(
                    "127.0.0.1", upstream, timeout=60)
            try:
                conn.request(method, path, headers=headers)
                r = conn.getresponse()
                return r.status, r.getheaders(), r.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                local.conn = None
                if attempt:
                    raise
        raise OSError("unreachable")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def log(self, fault):
            with log_lock, open(log_file, "a") as f:
                f.write("%s %s %s -> %s\n" % (
                    self.command, self.path,
                    self.headers.get("Range", "-"), fault or "ok"))

        def raw(self, data):
            self.wfile.write(data)
            self.wfile.flush()

        def head_bytes(self, status, reason, headers):
            out = ["HTTP/1.1 %d %s\r\n" % (status, reason)]
            for k, v in headers:
                out.append("%s: %s\r\n" % (k, v))
            out.append("\r\n")
            return "".join(out).encode("latin-1")

        def control(self):
            u = urllib.parse.urlparse(self.path)
            q = urllib.parse.parse_qs(u.query)
            if u.path == "/__chaos/set":
                with st.lock:
                    names = [f for f in q.get("faults", [""])[0].split(",")
                             if f]
                    bad = [f for f in names if f not in FAULTS]
                    if bad:
                        body = ("unknown fault %s\n" % bad).encode()
                        self.send_response(400)
                    else:
                        st.faults = names
                        st.rate = float(q.get("rate", ["0"])[0])
                        st.stall = float(q.get("stall", ["30"])[0])
                        st.rng = random.Random(int(q.get("seed", ["1"])[0]))
                        st.counts = {}
                        body = b"ok\n"
                        self.send_response(200)
            elif u.path == "/__chaos/strays":
                with st.lock:
                    body = json.dumps({"begun": st.strays_begun,
                                       "written": st.strays_written}).encode()
                self.send_response(200)
            else:
                with st.lock:
                    body = json.dumps(st.counts).encode()
                self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.raw(body)

        def do_HEAD(self):
            self.forward()

        def do_GET(self):
            if self.path.startswith("/__chaos/"):
                return self.control()
            self.forward()

        def forward(self):
            hdrs = {k: v for k, v in self.headers.items()
                    if k.lower() not in ("connection", "keep-alive")}
            listing = "list-type=2" in self.path
            fault = None
            if self.command == "GET":
                fault = st.pick()
                if listing and fault is not None and \
                        not fault.startswith("list_"):
                    fault = "503"
                elif not listing and fault is not None and \
                        fault.startswith("list_"):
                    fault = None
            self.log(fault)
            if fault == "503":
                return self.send_plain(503, "Slow Down", SLOWDOWN,
                                       [("Content-Type", "application/xml")])
            if fault == "stall_headers":
                time.sleep(st.stall)
                self.close_connection = True
                return
            rng = self.headers.get("Range")
            if fault in ("cr_early", "cr_late") and rng:
                m = re.match(r"bytes=(\d+)-(\d+)$", rng)
                if m:
                    a, b = int(m.group(1)), int(m.group(2))
                    d = max(1, (b - a + 1) // 3)
                    if fault == "cr_early" and a < d:
                        fault = "cr_late"
                    if fault == "cr_early":
                        a, b = a - d, b - d
                    else:
                        a, b = a + d, b + d
                    hdrs["Range"] = "bytes=%d-%d" % (a, b)
            path = self.path
            if listing:
                # Our own tokens mean nothing to s3rver: ask for page one.
                path = re.sub(r"continuation-token=(loop|spin\d+)&?", "",
                              path)
            status, headers, body = upstream_request(self.command, path,
                                                     hdrs)
            if listing and fault in ("list_loop", "list_spin",
                                     "list_endless") and \
                    status == 200:
                return self.reply(None, status, headers,
                                  self.looping_page(fault, body))
            if self.command != "GET" or listing or status not in (200, 206):
                fault = None
            if fault == "ignore_range" and rng and status == 206:
                hdrs.pop("Range", None)
                status, headers, body = upstream_request("GET", self.path,
                                                         hdrs)
            return self.reply(fault, status, headers, body)

        def looping_page(self, fault, body):
            with st.lock:
                st.spins = getattr(st, "spins", 0) + 1
                token = "loop" if fault == "list_loop" else "spin%d" % st.spins
                page = st.spins
            if fault == "list_endless":
                body = re.sub(rb"<Key>([^<]*)</Key>",
                              lambda m: b"<Key>%s.p%d</Key>" % (m.group(1),
                                                                page),
                              body)
            body = re.sub(rb"<IsTruncated>false</IsTruncated>",
                          b"<IsTruncated>true</IsTruncated>", body)
            body = re.sub(rb"<NextContinuationToken>[^<]*"
                          rb"</NextContinuationToken>", b"", body)
            return body.replace(b"</IsTruncated>", b"</IsTruncated>"
                                b"<NextContinuationToken>" + token.encode() +
                                b"</NextContinuationToken>", 1)

        def send_plain(self, status, reason, body, extra):
            self.raw(self.head_bytes(status, reason, extra + [
                ("Content-Length", str(len(body)))]) + body)

        def reply(self, fault, status, headers, body):
            keep = [(k, v) for k, v in headers
                    if k.lower() not in ("content-length", "connection",
                                         "keep-alive", "transfer-encoding")]
            reason = http.client.responses.get(status, "OK")
            cl = len(body)
            half = len(body) // 2
            if fault == "short_honest" and len(body) > 0:
                body = body[:half]
                cl = len(body)
                keep = [(k, v) for k, v in keep
                        if k.lower() != "content-range"]
                if status == 206:
                    cr = dict((k.lower(), v) for k, v in headers).get(
                        "content-range", "")
                    m = re.match(r"bytes (\d+)-(\d+)/(\d+)", cr)
                    if m and len(body) > 0:
                        a = int(m.group(1))
                        keep.append(("Content-Range", "bytes %d-%d/%s" % (
                            a, a + len(body) - 1, m.group(3))))
                    elif m:
                        keep.append(("Content-Range", cr))
            elif fault == "cr_missing" and status == 206:
                keep = [(k, v) for k, v in keep
                        if k.lower() != "content-range"]
            elif fault == "cr_total" and status == 206:
                new = []
                for k, v in keep:
                    m = re.match(r"bytes (\d+)-(\d+)/(\d+)", v)
                    if k.lower() == "content-range" and m:
                        v = "bytes %s-%s/%d" % (m.group(1), m.group(2),
                                                int(m.group(3)) + 1000)
                    new.append((k, v))
                keep = new
            elif fault == "no_etag":
                keep = [(k, v) for k, v in keep if k.lower() != "etag"]
            elif fault == "cr_junk" and status == 206:
                keep = [(k, v + "x" if k.lower() == "content-range" else v)
                        for k, v in keep]
            elif fault == "flip" and len(body) > 0:
                b = bytearray(body)
                b[len(b) // 2] ^= 0x10
                body = bytes(b)
            if fault == "cl_short":
                cl = half
            elif fault == "cl_long":
                cl = len(body) + 100
            head = self.head_bytes(status, reason,
                                   keep + [("Content-Length", str(cl))])
            if fault == "reset":
                self.raw(head + body[:half])
                self.connection.setsockopt(socket.SOL_SOCKET,
                                           socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.close_connection = True
                return
            if fault in ("short_dishonest", "stall_body"):
                self.raw(head + body[:half])
                if fault == "stall_body":
                    time.sleep(st.stall)
                self.close_connection = True
                return
            if fault == "cl_long":
                self.raw(head + body)
                self.close_connection = True
                return
            if fault == "trickle":
                self.raw(head)
                try:
                    for i in range(0, len(body), 2):
                        self.raw(body[i:i + 2])
                        time.sleep(1)
                except OSError:
                    pass
                self.close_connection = True
                return
            if fault in ("extra_now", "extra_next", "extra_late"):
                # Framed exactly like the real reply, so only which
                # request it answers is wrong. "written" counts a stray
                # reply once its first bytes are sent (its body may wait
                # for a reader that never comes).
                with st.lock:
                    st.strays_begun += 1
                try:
                    if fault == "extra_now":
                        self.raw(head + body + head)
                    else:
                        self.raw(head + body)
                        if fault == "extra_late":
                            time.sleep(EXTRA_MS / 1000)
                        self.raw(head)
                finally:
                    with st.lock:
                        st.strays_written += 1
                self.raw(bytes(len(body)))
                return
            if fault == "surplus":
                self.raw(head + body + b"HTTP/1.1 200 OK\r\nX-Junk: 1\r\n"
                         b"Content-Length: 5\r\n\r\njunk!" + os.urandom(32))
                return
            self.raw(head + body)

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

    srv = Server(("127.0.0.1", 0), Handler)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
