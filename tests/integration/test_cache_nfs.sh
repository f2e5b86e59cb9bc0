#!/usr/bin/env bash
# test_cache.sh over nfs://: the same checks against nfs-ganesha on 127.0.0.1
# (SOURCE=nfs, see source.sh); its closing line is "cache_nfs: ...".
SOURCE=nfs exec bash "$(dirname "$0")/test_cache.sh"
