#!/usr/bin/python3
"""Signs one S3 request with botocore, an implementation independent of
backends/s3_sign.c, for a fixed date; check_s3 compares the result with its
own Authorization header.

    sigv4_botocore.py METHOD BASE PATH QUERY_JSON AMZDATE REGION AK SK [TOKEN]

BASE is scheme://host[:port]; PATH the raw, unencoded path ("/bkt/a b.bin");
QUERY_JSON a JSON object of raw query parameters. botocore encodes the path
and the parameters itself. Prints the Authorization header value.
Needs Debian's python3-botocore (run with /usr/bin/python3).
"""
import datetime
import json
import sys
from unittest import mock
from urllib.parse import quote

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def main():
    method, base, path, query, amz_date, region, ak, sk = sys.argv[1:9]
    token = sys.argv[9] if len(sys.argv) > 9 else None
    path_bytes = path.encode("utf-8", "surrogateescape")
    url = base + quote(path_bytes, safe="/-_.~")
    req = AWSRequest(method=method, url=url, params=json.loads(query))
    when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
    auth = S3SigV4Auth(Credentials(ak, sk, token), "s3", region)
    with mock.patch("botocore.auth.datetime") as dt:
        dt.datetime.utcnow.return_value = when
        auth.add_auth(req)
    print(req.headers["Authorization"])


if __name__ == "__main__":
    main()
