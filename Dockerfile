FROM python:3.11-slim
WORKDIR /srv/switchyard
COPY pyproject.toml README.md celeryconfig.py alembic.ini ./
COPY app app
COPY tasks tasks
COPY models models
COPY alembic alembic
RUN pip install --no-cache-dir -e .
ENV SWITCHYARD_DATA_DIR=/var/lib/switchyard
RUN useradd --system switchyard && mkdir -p /var/lib/switchyard && chown switchyard /var/lib/switchyard
USER switchyard
EXPOSE 8000
CMD ["switchyard", "web", "--host", "0.0.0.0", "--port", "8000"]
