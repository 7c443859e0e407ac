#!/bin/sh
# envbuild 0.1.0: prepares a container of the image of gpt-neox (local) before its run.
# data without a sha256 in the recipe (gpt2-vocab, gpt2-merges, enron) is not baked into a layer:
# /opt/envbuild/gpt-neox/.envbuild/files/prepare.sh fetches it when a container starts (network
# needed there; the first fetch's sha256 is recorded in the container and printed, later fetches
# must match it); envbuild launch runs it before the training command. Record the sha256 in the
# recipe's data section to bake the file
set -eu
ROOTS=/opt/envbuild/gpt-neox/src/gpt-neox  # the trees the steps write into
# usage: prepare.sh                 fetch and prepare here (one container)
#        prepare.sh --stage DIR     ... and keep what the steps wrote under DIR (with SHA256SUMS);
#                                   DIR kept by an earlier job whose SHA256SUMS holds: nothing done
#        prepare.sh --from DIR      copy what --stage kept into place, every file checked first
mode=run
stage=
case "${1:-}" in
  --stage|--from) mode="${1#--}"; stage="${2:?prepare.sh $1 needs a folder}" ;;
  "") ;;
  *) echo "prepare.sh: unknown argument $1" >&2; exit 2 ;;
esac
checked() { [ -f "$stage/SHA256SUMS" ] && (cd "$stage" && sha256sum -c --quiet --strict SHA256SUMS); }
if [ "$mode" = from ]; then
  checked || { echo "prepare.sh: $stage does not hold data matching its SHA256SUMS" >&2; exit 1; }
  for root in $ROOTS; do
    if [ -d "$stage/files$root" ]; then mkdir -p "$root" && cp -R "$stage/files$root/." "$root/"; fi
  done
  echo "prepare.sh: data copied from $stage (sha256 checked)"
  exit 0
fi
if [ "$mode" = stage ] && checked; then
  echo "prepare.sh: data already prepared in $stage by an earlier job (sha256 checked)"
  exit 0
fi
stamp="$(mktemp)"  # what the steps write is newer: dated a second back (the clock's tick is coarse)
touch -d "@$(($(date +%s) - 1))" "$stamp" 2>/dev/null || sleep 1
# --- the run-time steps
# step data:gpt-neox: 3 data file(s) for gpt-neox
mkdir -p /opt/envbuild/gpt-neox/.envbuild/data
mkdir -p /opt/envbuild/gpt-neox/.envbuild/tools && cp /opt/envbuild/gpt-neox/.envbuild/files/assets/node/fetch_data.py /opt/envbuild/gpt-neox/.envbuild/tools/fetch_data.py && chmod 0644 /opt/envbuild/gpt-neox/.envbuild/tools/fetch_data.py
/opt/envbuild/gpt-neox/bin/python /opt/envbuild/gpt-neox/.envbuild/tools/fetch_data.py --name gpt2-vocab --url https://s3.amazonaws.com/models.huggingface.co/bert/gpt2-vocab.json --dest /opt/envbuild/gpt-neox/src/gpt-neox/data/gpt2-vocab.json --record-dir /opt/envbuild/gpt-neox/.envbuild/data --root /opt/envbuild/gpt-neox/src/gpt-neox
/opt/envbuild/gpt-neox/bin/python /opt/envbuild/gpt-neox/.envbuild/tools/fetch_data.py --name gpt2-merges --url https://s3.amazonaws.com/models.huggingface.co/bert/gpt2-merges.txt --dest /opt/envbuild/gpt-neox/src/gpt-neox/data/gpt2-merges.txt --record-dir /opt/envbuild/gpt-neox/.envbuild/data --root /opt/envbuild/gpt-neox/src/gpt-neox
/opt/envbuild/gpt-neox/bin/python /opt/envbuild/gpt-neox/.envbuild/tools/fetch_data.py --name enron --url http://eaidata.bmk.sh/data/enron_emails.jsonl.zst --dest /opt/envbuild/gpt-neox/src/gpt-neox/data/enron/enron_emails.jsonl.zst --record-dir /opt/envbuild/gpt-neox/.envbuild/data --root /opt/envbuild/gpt-neox/src/gpt-neox
# --- end of the run-time steps
if [ "$mode" = stage ]; then
  rm -rf "$stage/files" "$stage/SHA256SUMS"
  mkdir -p "$stage/files"
  for root in $ROOTS; do
    find "$root" -type f -newer "$stamp" | while IFS= read -r f; do
      mkdir -p "$stage/files$(dirname "$f")" && cp -p "$f" "$stage/files$f"
    done
  done
  (cd "$stage" && find files -type f -exec sha256sum {} + > SHA256SUMS.partial && mv SHA256SUMS.partial SHA256SUMS)
  echo "prepare.sh: data kept in $stage ($(wc -l < "$stage/SHA256SUMS") file(s))"
fi
rm -f "$stamp"
