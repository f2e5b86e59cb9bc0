#!/usr/bin/env bash
# test_prefetch.sh over gs://: the same checks against the GCS emulator
# (SOURCE=gcs, see source.sh); its closing line is "prefetch_gcs: ...".
SOURCE=gcs exec bash "$(dirname "$0")/test_prefetch.sh"
