FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    OPENBLAS_NUM_THREADS=1 \
    OMP_NUM_THREADS=1

WORKDIR /srv/gpucast
COPY pyproject.toml README.md ./
COPY app ./app
COPY forecasting ./forecasting
COPY capacity ./capacity
COPY migrations ./migrations
RUN pip install ".[dask]" && useradd --create-home gpucast
USER gpucast

EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --retries=5 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
# Migrate before serving so a fresh database is ready on first start.
CMD ["sh", "-c", "gpucast db upgrade && gpucast serve --host 0.0.0.0 --port 8000"]
