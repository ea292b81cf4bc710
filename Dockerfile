# Placeholder until the Kubernetes packaging issue: see issue "Kubernetes packaging".
FROM python:3.11-slim
COPY . /src
RUN pip install --no-cache-dir /src
ENTRYPOINT ["headwater"]
