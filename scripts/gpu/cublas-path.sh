# Sourced by the GPU machine's scripts: the CUDA JNI shim dlopens libcublas.so.13, so its folder must be on the
# loader path. Sets cublas to the library found (empty when none) and prepends its folder to LD_LIBRARY_PATH.
cublas=$(ldconfig -p | awk '/libcublas\.so\.13 /{print $NF; exit}')
if [ -z "$cublas" ]; then
    cublas=$(find / -xdev -name 'libcublas.so.13' -not -path '/proc/*' 2>/dev/null | head -1)
fi
[ -n "$cublas" ] && export LD_LIBRARY_PATH="$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
