#!/usr/bin/python3
"""An HTTP proxy in front of the GCS emulator that injects the faults a
GCS client must survive or report, for test_gcs.sh. Binds 127.0.0.1 only.

    fault_proxy.py PORT_FILE LOG_FILE UPSTREAM_PORT

Writes its port to PORT_FILE once listening. By object name (decoded):
  ...flaky...     the first 2 requests (per URL) get 503 backendError
  ...denied...    every request gets 403 forbidden (JSON API error body)
  ...badcrc...    media replies arrive with their last byte flipped
                  (headers, x-goog-hash included, unchanged)
  ...flipped...   every media reply that holds the object's middle byte
                  (offset size // 2) has bit 4 of it flipped (headers,
                  x-goog-hash included, unchanged)
  ...flipone...   the same, but only in the first such reply for the
                  object that is a 206 (one ranged read of a large object)
  ...wronghash... media replies carry an x-goog-hash whose crc32c is not
                  the object's (the body unchanged)
  ...realgen...   a media request pinned to a generation that is not the
                  current one gets 404 notFound, as real GCS answers
                  (the emulator serves the current generation instead)
  ...badrange...  206 replies name a Content-Range one byte later (its
                  end kept inside the object)
  ...gzipped...   plays real GCS's decompressive transcoding of an object
                  stored with Content-Encoding: gzip: a media request
                  without "Accept-Encoding: gzip" gets a chunked 200 with
                  no Content-Length, Range ignored, and other bytes (the
                  "decompressed" object); with it, the stored bytes pass
                  through (Range honoured), marked Content-Encoding: gzip
  ...nolength...  media replies are a chunked 200 of the whole object (the
                  Range dropped upstream), with no Content-Length
  ...longbody...  206 replies arrive chunked with one byte more than the
                  range (headers unchanged)
  ...shortbody... 206 replies arrive chunked with one byte less
  ...nogen...     media replies lose their x-goog-generation header
  ...dupgen...    media replies carry two x-goog-generation headers: a
                  wrong one first, then the real one
  ...stall...     media requests are never answered: the proxy holds
                  them for 60 s, then closes the connection
  ...extra...     every media reply is followed by a second, complete
                  reply with the same headers and a body of zeros (a
                  server answering twice), in turn in the same write, in
                  a write right after, and 5 ms after the real reply;
                  GET /__strays answers {"begun": B, "written": W}: such
                  replies begun, and those whose stray reply's first
                  bytes are sent
By listing prefix (the prefix= parameter, decoded):
  ...small...     pages of 3 objects (maxResults rewritten): real paging
  ...loop...      pages of 3, and every page's nextPageToken is the same
  ...restart...   pages of 3, every page a new nextPageToken, and the
                  pageToken sent upstream one the emulator does not know
                  (so it restarts the listing from its first object)
  ...empty...     no items ever, a new nextPageToken every page
  ...endless...   every page is the first page with each name renamed for
                  that page (NAME.pN) and a new nextPageToken: a listing
                  that never repeats itself and never ends
  ...badpage...   the first item's size is a JSON number, not a string
  ...unordered... pages of 3, the first two items of page 2 swapped
Everything else is forwarded unchanged. Each request appends
"METHOD PATH -> STATUS" to LOG_FILE.
"""
import http.client
import http.server
import json
import os
import re
import sys
import threading
import time
import urllib.parse


def main():
    port_file, log_file, upstream = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lock = threading.Lock()
    seen = {}
    empty_pages = [0]
    extras = [0, 0]  # stray replies begun, and first bytes sent

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def log(self, status):
            with lock, open(log_file, "a") as f:
                f.write("%s %s -> %d\n" % (self.command, self.path, status))

        def reply(self, status, body, headers=()):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.log(status)

        def reply_twice(self, status, body, headers):
            # The second reply is framed exactly like the first: only
            # which request it answers is wrong.
            head = ["HTTP/1.1 %d %s\r\n" % (
                status, http.client.responses.get(status, "OK"))]
            head += ["%s: %s\r\n" % (k, v) for k, v in headers]
            head.append("Content-Length: %d\r\n\r\n" % len(body))
            head = "".join(head).encode("latin-1")
            with lock:
                extras[0] += 1
                mode = extras[0] % 3
            self.log(status)
            try:
                if mode == 0:
                    self.wfile.write(head + body + head)
                else:
                    self.wfile.write(head + body)
                    self.wfile.flush()
                    if mode == 2:
                        time.sleep(0.005)
                    self.wfile.write(head)
                self.wfile.flush()
            finally:
                with lock:
                    extras[1] += 1
            self.wfile.write(bytes(len(body)))
            self.wfile.flush()

        def reply_chunked(self, status, body, headers=()):
            # No Content-Length: the body's end is the last chunk's.
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if body:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(body), body))
            self.wfile.write(b"0\r\n\r\n")
            self.log(status)

        def json_error(self, status, reason, message):
            body = json.dumps({"error": {"code": status, "message": message,
                                         "errors": [{"reason": reason,
                                                     "message": message}]}})
            self.reply(status, body.encode(),
                       [("Content-Type", "application/json")])

        def forward(self, path, drop=()):
            conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=60)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "connection") + drop}
            conn.request(self.command, path, headers=headers)
            r = conn.getresponse()
            body = r.read()
            hdrs = [(k, v) for k, v in r.getheaders()
                    if k.lower() not in ("content-length", "connection",
                                         "transfer-encoding", "keep-alive")]
            conn.close()
            return r.status, hdrs, body

        def do_GET(self):
            if self.path == "/__strays":
                with lock:
                    body = json.dumps({"begun": extras[0],
                                       "written": extras[1]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            u = urllib.parse.urlsplit(self.path)
            q = urllib.parse.parse_qsl(u.query, keep_blank_values=True)
            parts = u.path.split("/")
            # /storage/v1/b/B/o[/NAME]
            is_list = len(parts) == 6 and parts[5] == "o"
            name = urllib.parse.unquote(parts[6]) if len(parts) > 6 else ""
            with lock:
                n = seen.get(self.path, 0)
                seen[self.path] = n + 1
            if is_list:
                return self.list(u, q)
            if "denied" in name:
                return self.json_error(
                    403, "forbidden",
                    "anonymous caller does not have storage.objects.get "
                    "access to the object")
            gen = dict(q).get("generation")
            if "realgen" in name and gen is not None:
                # Real GCS serves only generations that exist: a pinned
                # generation that was replaced is a 404 (the emulator
                # ignores the parameter and serves the current one).
                status, _, meta = self.forward(u.path)
                if status != 200 or json.loads(meta).get("generation") != gen:
                    return self.json_error(
                        404, "notFound",
                        "No such object: %s#%s" % (name, gen))
            if "flaky" in name and n < 2:
                return self.json_error(503, "backendError",
                                       "Backend Error")
            media = dict(q).get("alt") == "media"
            if media and "stall" in name:
                time.sleep(60)
                self.close_connection = True
                return
            if "gzipped" in name and media:
                ae = self.headers.get_all("Accept-Encoding") or []
                if not any("gzip" in v.lower() for v in ae):
                    # Transcoded: the whole object decompressed, so
                    # neither the stored bytes nor their length.
                    status, hdrs, body = self.forward(self.path,
                                                      ("range",))
                    hdrs = [(k, v) for k, v in hdrs
                            if k.lower() not in ("content-range",
                                                 "x-goog-hash")]
                    return self.reply_chunked(status, body * 2 + b"!",
                                              hdrs)
                status, hdrs, body = self.forward(self.path)
                return self.reply(status, body,
                                  hdrs + [("Content-Encoding", "gzip")])
            if "nolength" in name and media:
                status, hdrs, body = self.forward(self.path, ("range",))
                return self.reply_chunked(status, body, hdrs)
            status, hdrs, body = self.forward(self.path)
            if media and status == 206 and ("longbody" in name or
                                            "shortbody" in name):
                body = body + b"+" if "longbody" in name else body[:-1]
                return self.reply_chunked(status, body, hdrs)
            if media and "nogen" in name:
                hdrs = [(k, v) for k, v in hdrs
                        if k.lower() != "x-goog-generation"]
            if media and "dupgen" in name:
                hdrs = [("x-goog-generation", "1")] + hdrs
            if media and "extra" in name and status in (200, 206):
                return self.reply_twice(status, body, hdrs)
            if "badcrc" in name and status in (200, 206) and body:
                body = body[:-1] + bytes([body[-1] ^ 1])
            if media and status in (200, 206) and ("flipped" in name or
                                                   "flipone" in name):
                body = self.flip(name, status, hdrs, body)
            if media and "wronghash" in name:
                hdrs = [(k, "crc32c=AAAAAA==" if k.lower() == "x-goog-hash"
                         else v) for k, v in hdrs]
            if "badrange" in name and status == 206:
                fixed = []
                for k, v in hdrs:
                    if k.lower() == "content-range":
                        a, rest = v[len("bytes "):].split("-", 1)
                        b, total = rest.split("/")
                        # One byte later, kept inside the object.
                        b2 = int(b) + 1 if int(b) + 1 < int(total) else int(b)
                        v = "bytes %d-%d/%s" % (int(a) + 1, b2, total)
                    fixed.append((k, v))
                hdrs = fixed
            self.reply(status, body, hdrs)

        def flip(self, name, status, hdrs, body):
            # The reply's place in the object: Content-Range, or all of it.
            start, size = 0, len(body)
            for k, v in hdrs:
                m = re.match(r"bytes (\d+)-(\d+)/(\d+)", v)
                if k.lower() == "content-range" and m:
                    start, size = int(m.group(1)), int(m.group(3))
            at = size // 2 - start
            if not 0 <= at < len(body):
                return body
            if "flipone" in name:
                with lock:
                    if status != 206 or seen.get(("flipped", name)):
                        return body
                    seen[("flipped", name)] = 1
            b = bytearray(body)
            b[at] ^= 0x10
            with lock, open(log_file, "a") as f:
                f.write("flipped %s at %d\n" % (name, size // 2))
            return bytes(b)

        def list(self, u, q):
            prefix = dict(q).get("prefix", "")
            small = any(s in prefix
                        for s in ("small", "loop", "restart", "unordered"))
            if "empty" in prefix:
                with lock:
                    empty_pages[0] += 1
                    tok = "e%d" % empty_pages[0]
                return self.reply(200, json.dumps(
                    {"kind": "storage#objects", "nextPageToken": tok}).encode(),
                    [("Content-Type", "application/json")])
            q2 = []
            for k, v in q:
                if k == "maxResults" and small:
                    v = "3"
                if k == "pageToken" and "restart" in prefix:
                    v = "no-such-token"
                if k == "pageToken" and "endless" in prefix:
                    continue  # ours: the emulator gets page one
                q2.append((k, v))
            path = u.path + "?" + urllib.parse.urlencode(q2, quote_via=urllib.parse.quote)
            status, hdrs, body = self.forward(path)
            if status == 200 and any(s in prefix for s in ("loop", "restart", "badpage",
                                                         "unordered", "endless")):
                page = json.loads(body)
                if "endless" in prefix:
                    with lock:
                        empty_pages[0] += 1
                        n = empty_pages[0]
                    for it in page.get("items", []):
                        it["name"] += ".p%d" % n
                    page["nextPageToken"] = "endless-%d" % n
                if "loop" in prefix and "nextPageToken" in page:
                    page["nextPageToken"] = "the-same-token"
                if "restart" in prefix and "nextPageToken" in page:
                    # A new token every page: only the names show that
                    # the listing went back to its start.
                    with lock:
                        empty_pages[0] += 1
                        page["nextPageToken"] += "|%d" % empty_pages[0]
                if "badpage" in prefix and page.get("items"):
                    page["items"][0]["size"] = int(page["items"][0]["size"])
                if ("unordered" in prefix and "pageToken" in dict(q) and
                        len(page.get("items", [])) >= 2):
                    with lock:
                        first = "unordered2" not in seen
                        seen["unordered2"] = 1
                    if first:
                        it = page["items"]
                        it[0], it[1] = it[1], it[0]
                body = json.dumps(page).encode()
            self.reply(status, body, hdrs)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
