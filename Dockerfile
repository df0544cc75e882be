# One image for the Ray head, the Ray workers and the service, so Ray, Python, torch and the
# foldwise code are the same everywhere (Ray pickles our functions by reference).
FROM rayproject/ray:2.60.0-py311-cpu
WORKDIR /app
COPY pyproject.toml README.md ./
COPY foldwise foldwise
COPY optimizers optimizers
COPY trainers trainers
COPY service service
COPY migrations migrations
RUN pip install --no-cache-dir -e '.[server]'
