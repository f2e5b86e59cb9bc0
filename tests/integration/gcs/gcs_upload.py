#!/usr/bin/python3
"""Uploads a directory tree to the GCS emulator (or any GCS JSON API).

gcs_upload.py ENDPOINT BUCKET PREFIX DIR [--threads N]: every file under
DIR becomes the object PREFIX + its path relative to DIR, by a media
upload (POST /upload/storage/v1/b/BUCKET/o?uploadType=media&name=...) with
the name fully percent-encoded. A few keep-alive connections in parallel:
thousands of small objects take seconds, not a curl process each. Exits 1
on the first upload that is not HTTP 200.
"""
import http.client
import os
import sys
import threading
import urllib.parse


def main():
    args = sys.argv[1:]
    threads = 4
    if "--threads" in args:
        i = args.index("--threads")
        threads = int(args[i + 1])
        del args[i:i + 2]
    endpoint, bucket, prefix, root = args
    u = urllib.parse.urlsplit(endpoint)
    files = []
    for d, _, names in os.walk(os.fsencode(root)):
        for n in names:
            p = os.path.join(d, n)
            files.append((p, prefix.encode() + os.path.relpath(p, os.fsencode(root))))
    files.sort()
    errors = []
    lock = threading.Lock()

    def worker(part):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        for path, name in part:
            with open(path, "rb") as f:
                body = f.read()
            url = "/upload/storage/v1/b/%s/o?uploadType=media&name=%s" % (
                urllib.parse.quote(bucket, safe=""),
                urllib.parse.quote(name, safe="-._~"))
            for attempt in range(3):
                try:
                    conn.request("POST", url, body=body, headers={
                        "Content-Type": "application/octet-stream"})
                    r = conn.getresponse()
                    text = r.read()
                    break
                except (http.client.HTTPException, OSError):
                    conn.close()
                    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
                    if attempt == 2:
                        raise
            if r.status != 200:
                with lock:
                    errors.append("%r: HTTP %d %s" % (name, r.status, text[:200]))
                return
        conn.close()

    ts = [threading.Thread(target=worker, args=(files[i::threads],)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for e in errors:
        print("gcs_upload.py: " + e, file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
