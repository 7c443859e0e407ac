#!/bin/sh
# Debian packages the report tests need (merged into .ci/run by the lead).
# chromium: tests/test_report_html.py opens the HTML report headless and screenshots it.
set -eu
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
