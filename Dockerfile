FROM python:3.11-slim
# The system parts (`switchyard doctor` lists them): Chromium for page checks; git, ripgrep,
# bubblewrap (the coding agent's sandbox), python3 with venv and pytest for Python
# repositories' checks, Node.js and npm for JavaScript ones, the fonts a PDF report embeds
# (tasks/startup/reports/fonts.py). util-linux (setpriv, prlimit)
# is part of the base image.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      chromium git ripgrep bubblewrap python3 python3-venv python3-pytest nodejs npm \
      fonts-dejavu-core fonts-wqy-zenhei ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /srv/switchyard
COPY pyproject.toml README.md celeryconfig.py alembic.ini ./
COPY app app
COPY tasks tasks
COPY models models
COPY alembic alembic
# pytest too: the sandbox's PATH finds this image's python3 (/usr/local/bin) before
# Debian's, and a Python repository's checks run `python3 -m pytest`.
RUN pip install --no-cache-dir -e . pytest
ENV SWITCHYARD_DATA_DIR=/var/lib/switchyard
RUN useradd --system switchyard && mkdir -p /var/lib/switchyard && chown switchyard /var/lib/switchyard
# An ordinary user: the coding agent's commands run as it, in bubblewrap's namespaces, which
# show them none of its files (docker-compose.yml gives the worker what bubblewrap needs).
USER switchyard
EXPOSE 8000
CMD ["switchyard", "web", "--host", "0.0.0.0", "--port", "8000"]
