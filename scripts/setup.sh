#!/usr/bin/env bash
# setup.sh: one-shot installer for kiln's build and test dependencies on a
# fresh Debian 12 (bookworm) machine. Run as root (or through sudo).
#
#   scripts/setup.sh [--dry-run] [--skip-apt] [--skip-ort] [--skip-corpus]
#                    [--skip-generated]
#
# 1. Debian packages (apt-get update + apt-get install -y
#    --no-install-recommends), skipped entirely
#    when every package is already installed (checked with dpkg-query).
# 2. The ONNX Runtime reference bridge: `npm ci` in scripts/ort with
#    ONNXRUNTIME_NODE_INSTALL=skip (the CPU binaries ship inside the npm
#    package; skip only stops its CUDA download), skipped when
#    scripts/ort/node_modules already matches scripts/ort/package-lock.json.
# 3. The model corpus: scripts/fetch_corpus.sh into
#    ${KILN_CORPUS_DIR:-$HOME/.cache/kiln/corpus} (skips models present).
# 4. The generated corpus: scripts/gen_corpus.py (PyTorch exports with seeded
#    weights) into ${KILN_GENERATED_DIR:-$HOME/.cache/kiln/generated}; only
#    models missing or out of date are made (the first time: a few minutes).
#
# It does not build kiln. Idempotent; a second run takes about a second.
# Under sudo, steps 2 and 3 run as $SUDO_USER (so node_modules and the corpus
# belong to that user and the corpus lands in that user's home).
#
#   --dry-run      show what would be done; apt-get runs with -s (simulate),
#                  nothing is installed or fetched
#   --skip-apt     skip step 1      --skip-ort     skip step 2
#   --skip-corpus  skip step 3      --skip-generated  skip step 4
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ORT_DIR="$ROOT/scripts/ort"

# Debian 12 packages. Keep in sync with the dependency table in DESIGN.md.
# Installed with --no-install-recommends (chromium alone would pull ~100
# desktop packages through its recommends), so what is needed is named here:
# ca-certificates is only a recommend of nodejs, but npm needs it for HTTPS.
PACKAGES=(
  build-essential cmake ninja-build ccache lld clang
  clang-19 lld-19 libclang-rt-19-dev llvm-19-dev llvm-19-tools libzstd-dev
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  python3-onnx python3-numpy python3-pytest pybind11-dev
  python3-torch python3-torchvision python3-torchaudio
  libgtest-dev libgmock-dev libbenchmark-dev
  glslang-dev glslang-tools spirv-tools libvulkan-dev mesa-vulkan-drivers
  nodejs npm ca-certificates
  chromium
)

DRY_RUN=0 SKIP_APT=0 SKIP_ORT=0 SKIP_CORPUS=0 SKIP_GENERATED=0
for arg in "$@"; do
  case "$arg" in
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --dry-run) DRY_RUN=1 ;;
    --skip-apt) SKIP_APT=1 ;;
    --skip-ort) SKIP_ORT=1 ;;
    --skip-corpus) SKIP_CORPUS=1 ;;
    --skip-generated) SKIP_GENERATED=1 ;;
    *) echo "setup.sh: error: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

log() { echo "setup: $*"; }
die() { echo "setup: error: $*" >&2; exit 1; }
t_start=$(date +%s)

# Run a command as the invoking user when root came from sudo.
as_user() {
  if [ "$(id -u)" = 0 ] && [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
    sudo -u "$SUDO_USER" -H env PATH="$PATH" ${KILN_CORPUS_DIR:+KILN_CORPUS_DIR="$KILN_CORPUS_DIR"} \
      ${KILN_CORPUS_TARBALLS:+KILN_CORPUS_TARBALLS="$KILN_CORPUS_TARBALLS"} \
      ${KILN_GENERATED_DIR:+KILN_GENERATED_DIR="$KILN_GENERATED_DIR"} "$@"
  else
    "$@"
  fi
}

if [ -r /etc/os-release ]; then
  # shellcheck disable=SC1091
  codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
  [ "$codename" = bookworm ] || log "warning: this is not Debian 12 (bookworm) but '${codename:-unknown}'; continuing"
fi

# --- 1. Debian packages -------------------------------------------------------------
installed() { [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" = "ii " ]; }

if [ "$SKIP_APT" = 0 ]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    installed "$p" && continue
    # A nodejs package that bundles npm (e.g. NodeSource's) provides and
    # conflicts with Debian's npm: asking apt for npm then fails. Any working
    # npm will do.
    if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
    missing+=("$p")
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    log "Debian packages: all ${#PACKAGES[@]} installed"
  else
    log "Debian packages to install: ${missing[*]}"
    command -v apt-get >/dev/null || die "apt-get not found: this script is for Debian 12"
    SUDO=()
    if [ "$(id -u)" != 0 ]; then
      command -v sudo >/dev/null || die "installing packages needs root: run as root or install sudo"
      SUDO=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    if [ "$DRY_RUN" = 1 ]; then
      "${SUDO[@]}" apt-get install -s -y --no-install-recommends "${missing[@]}" | grep -E '^(Inst|E:|[0-9]+ upgraded)' || true
    else
      "${SUDO[@]}" apt-get -q update
      "${SUDO[@]}" apt-get -q install -y --no-install-recommends "${missing[@]}"
      still=()
      for p in "${missing[@]}"; do installed "$p" || still+=("$p"); done
      [ "${#still[@]}" -eq 0 ] || die "still not installed after apt-get: ${still[*]}"
    fi
  fi
fi

# --- 2. ONNX Runtime bridge (scripts/ort) --------------------------------------------
if [ "$SKIP_ORT" = 0 ]; then
  command -v node >/dev/null || die "node not found (apt-get install nodejs)"
  command -v npm >/dev/null || die "npm not found (apt-get install npm)"
  node_major="$(node -p 'process.versions.node.split(".")[0]')"
  [ "$node_major" -ge 18 ] || die "node $(node --version) is too old: onnxruntime-node 1.30 needs node >= 18"
  stamp="$ORT_DIR/node_modules/.kiln-lock.sha256"
  want="$(sha256sum "$ORT_DIR/package-lock.json" | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
     && (cd "$ORT_DIR" && node -e "require('onnxruntime-node')") >/dev/null 2>&1; then
    log "ORT bridge: scripts/ort/node_modules up to date"
  elif [ "$DRY_RUN" = 1 ]; then
    log "ORT bridge: would run (cd scripts/ort && ONNXRUNTIME_NODE_INSTALL=skip npm ci)"
  else
    log "ORT bridge: npm ci in scripts/ort"
    # --ignore-scripts: the only install script is onnxruntime-node's, which
    # would fetch CUDA binaries from NuGet; the env var skips it too.
    (cd "$ORT_DIR" && as_user env ONNXRUNTIME_NODE_INSTALL=skip \
       npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    (cd "$ORT_DIR" && node -e "const o=require('onnxruntime-node'); console.log('setup: onnxruntime-node ' + o.env.versions.node)") \
      || die "onnxruntime-node does not load after npm ci"
    # shellcheck disable=SC2016
    as_user sh -c 'echo "$1" > "$2"' sh "$want" "$stamp"
  fi
fi

# --- 3. Model corpus --------------------------------------------------------------------
if [ "$SKIP_CORPUS" = 0 ]; then
  if [ "$DRY_RUN" = 1 ]; then
    as_user "$ROOT/scripts/fetch_corpus.sh" --check || log "corpus: would fetch the models above"
  else
    as_user "$ROOT/scripts/fetch_corpus.sh"
  fi
fi

# --- 4. Generated corpus ------------------------------------------------------------------
if [ "$SKIP_GENERATED" = 0 ]; then
  if [ "$DRY_RUN" = 1 ]; then
    as_user /usr/bin/python3 "$ROOT/scripts/gen_corpus.py" --check || log "generated corpus: would generate the models above"
  else
    as_user /usr/bin/python3 "$ROOT/scripts/gen_corpus.py"
  fi
fi

log "done in $(( $(date +%s) - t_start ))s"
