#!/usr/bin/python3
"""An HTTP proxy in front of s3rver that injects the faults real S3 shows,
for test_s3.sh's retry checks. Binds 127.0.0.1 only.

    fault_proxy.py PORT_FILE LOG_FILE UPSTREAM_PORT

Writes its port to PORT_FILE once listening. By key (the request path):
  ...flaky...   the first 2 requests for the path get 503 SlowDown
  ...busy...    the first request for the path gets 429 (no body)
  ...broken...  every request gets 500 InternalError
  ...flipped...  every GET reply that holds the object's middle byte
                (offset size // 2) has bit 4 of it flipped; framing and
                headers (the ETag, the object's MD5) unchanged
  ...flipone...  the same, but only in the first such reply for the path
                that is a 206 (one ranged read of a large object)
  ...kms...      plays SSE-KMS: the ETag (in listings, GET and HEAD) is
                not the object's MD5 but another 32 hex digits, and GET and
                HEAD replies carry x-amz-server-side-encryption: aws:kms
  a listing     the first ListObjectsV2 request gets 503 SlowDown
Everything else, and every request once its faults are spent, is forwarded
to s3rver on 127.0.0.1:UPSTREAM_PORT unchanged (s3rver checks only the key
id of the signature, so forwarding keeps requests valid). Each request
appends "METHOD PATH -> STATUS" to LOG_FILE ("... -> STATUS flipped" for
a reply with a bit flipped).
"""
import hashlib
import http.client
import http.server
import os
import re
import sys
import threading

ERROR = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
         "<Message>%s</Message><Resource>%s</Resource></Error>")


def kms_etag(etag):
    """The ETag an SSE-KMS object would have: 32 hex digits, not its MD5."""
    return '"%s"' % hashlib.md5(("kms" + etag).encode()).hexdigest()


def kms(method, path, hdrs, data):
    """Rewrites a reply as S3 sends it for an SSE-KMS object (see above)."""
    out = []
    for k, v in hdrs:
        if k.lower() == "etag":
            v = kms_etag(v.strip('"'))
        out.append((k, v))
    if data.lstrip().startswith(b"<?xml") and b"<ListBucketResult" in data:
        # Every <Contents> whose key names kms gets the rewritten ETag
        # (entity-encoded quotes, as s3rver sends them).
        def one(m):
            c = m.group(0)
            if b"kms" not in c:
                return c
            return re.sub(rb"<ETag>(?:&quot;|\")([0-9a-f]{32})(?:&quot;|\")</ETag>",
                          lambda e: b"<ETag>" + kms_etag(e.group(1).decode()).replace(
                              '"', "&quot;").encode() + b"</ETag>", c)
        data = re.sub(rb"<Contents>.*?</Contents>", one, data, flags=re.S)
    else:
        out.append(("x-amz-server-side-encryption", "aws:kms"))
    return out, data


def main():
    port_file, log_file, upstream = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lock = threading.Lock()
    seen = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def log(self, status, note=""):
            with lock, open(log_file, "a") as f:
                f.write("%s %s -> %d%s\n" % (self.command, self.path,
                                                status, note))

        def fault(self):
            path = self.path.split("?")[0]
            with lock:
                n = seen.get((self.command, self.path), 0)
                seen[(self.command, self.path)] = n + 1
                lists = seen.get("list", 0)
                if "list-type=2" in self.path:
                    seen["list"] = lists + 1
            if "broken" in path:
                return 500, "InternalError", "We encountered an internal error."
            if "flaky" in path and n < 2:
                return 503, "SlowDown", "Please reduce your request rate."
            if "busy" in path and n < 1:
                return 429, None, None
            if "list-type=2" in self.path and lists < 1:
                return 503, "SlowDown", "Please reduce your request rate."
            return None

        def send_error_reply(self, status, code, message):
            body = b"" if code is None else (ERROR % (code, message, self.path)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.log(status)

        def forward(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
            conn.request(self.command, self.path, body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            hdrs = r.getheaders()
            path = self.path.split("?")[0]
            note = ""
            if "kms" in path or ("list-type=2" in self.path and b"kms" in data):
                hdrs, data = kms(self.command, path, hdrs, data)
            if self.command == "GET" and r.status in (200, 206) and (
                    "flipped" in path or "flipone" in path):
                data, note = self.flip(path, r.status, hdrs, data)
            self.send_response(r.status)
            for k, v in hdrs:
                if k.lower() not in ("connection", "transfer-encoding", "content-length", "date", "server"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)) if self.command != "HEAD"
                             else r.getheader("Content-Length", "0"))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            conn.close()
            self.log(r.status, note)

        def flip(self, path, status, hdrs, data):
            # The reply's place in the object: Content-Range, or all of it.
            start, size = 0, len(data)
            for k, v in hdrs:
                m = re.match(r"bytes (\d+)-(\d+)/(\d+)", v)
                if k.lower() == "content-range" and m:
                    start, size = int(m.group(1)), int(m.group(3))
            at = size // 2 - start
            if not 0 <= at < len(data):
                return data, ""
            if "flipone" in path:
                with lock:
                    if status != 206 or seen.get(("flipped", path)):
                        return data, ""
                    seen[("flipped", path)] = 1
            b = bytearray(data)
            b[at] ^= 0x10
            return bytes(b), " flipped"

        def handle_any(self):
            f = self.fault()
            if f is not None:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                self.send_error_reply(*f)
            else:
                self.forward()

        do_GET = do_HEAD = do_PUT = do_POST = handle_any

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
