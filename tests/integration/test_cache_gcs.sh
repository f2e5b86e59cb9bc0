#!/usr/bin/env bash
# test_cache.sh over gs://: the same checks against the GCS emulator
# (SOURCE=gcs, see source.sh); its closing line is "cache_gcs: ...".
SOURCE=gcs exec bash "$(dirname "$0")/test_cache.sh"
