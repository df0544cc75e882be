# One image for the Ray head, the Ray workers and the service, so Ray, Python, torch and the
# foldwise code are the same everywhere (Ray pickles our functions by reference). Build args:
# RAY_IMAGE=rayproject/ray:2.60.0-py311-gpu with TORCH_INDEX_URL=https://pypi.org/simple (whose
# Linux torch wheels carry CUDA) for GPUs; EXTRA_PACKAGES=s3fs for an s3:// artifact store.
ARG RAY_IMAGE=rayproject/ray:2.60.0-py311-cpu
FROM ${RAY_IMAGE}
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG EXTRA_PACKAGES=""

# Made here and owned by the image's user (ray), so that a new named volume mounted on the
# artifact directory (docker-compose.yml) is writable; /opt/foldwise/user takes task packages.
USER root
RUN install -d -o ray -g users /app /var/lib/foldwise/artifacts /opt/foldwise/user
USER ray

WORKDIR /app
COPY --chown=ray:users pyproject.toml README.md ./
COPY --chown=ray:users foldwise foldwise
COPY --chown=ray:users integrations integrations
COPY --chown=ray:users optimizers optimizers
COPY --chown=ray:users pruners pruners
COPY --chown=ray:users trainers trainers
COPY --chown=ray:users service service
COPY --chown=ray:users migrations migrations
RUN pip install --no-cache-dir --extra-index-url "${TORCH_INDEX_URL}" \
    -e '.[server,lightning]' ${EXTRA_PACKAGES}
EXPOSE 8000
