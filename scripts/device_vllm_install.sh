# Sourced by the GPU machine's vLLM scripts (device_vllm_gpu.sh, device_region_cache_gpu.sh): joins the
# trimmed vLLM wheel's parts ($PARTS) and checks their sha256 ($D/SHA256SUMS), installs it and the small
# wheels offline into $W/site (--no-deps --target), gives frank's vllm.general_plugins entry points a
# dist-info there, and unpacks the tiny models into $FRANK_MODELS. Expects TREE, D, PARTS, W and stamp().
# A later call on a warm machine finds $W/site/.installed and skips it all.
vllm_install() {
    stamp "join and check the wheel"
    local wheel=$W/$(cut -d' ' -f3 "$D/SHA256SUMS")
    cat "$PARTS"/vllm.whl.part-* >"$wheel" && (cd "$W" && sha256sum -c "$D/SHA256SUMS") || return 1
    stamp "install offline (--no-deps --target)"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/site" \
        "$D"/wheels/*.whl "$wheel" || return 1
    rm -f "$wheel"
    # frank's plugins as vLLM finds them: the entry points of pyproject.toml in a dist-info of their own
    python3 - "$TREE/pyproject.toml" "$W/site" <<'PY' || return 1
import sys, tomllib, pathlib
project = tomllib.loads(pathlib.Path(sys.argv[1]).read_text())["project"]
info = pathlib.Path(sys.argv[2]) / f"frank-{project['version']}.dist-info"
info.mkdir(exist_ok=True)
(info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: frank\nVersion: {project['version']}\n")
lines = [f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for group, eps in project["entry-points"].items()]
(info / "entry_points.txt").write_text("\n".join(lines))
print(info, sorted(project["entry-points"]["vllm.general_plugins"]))
PY
    mkdir -p "$FRANK_MODELS" && tar -xzf "$D/models.tar.gz" -C "$FRANK_MODELS" || return 1
    touch "$W/site/.installed"
}
if [ -f "$W/site/.installed" ]; then
    stamp "vLLM already installed in $W/site (a warm machine)"
else
    vllm_install || exit 1
fi
python3 -c 'import torch, vllm; print("vllm", vllm.__version__, "torch", torch.__version__, torch.cuda.get_device_name(0))'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
