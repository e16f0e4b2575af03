"""The OpenAPI 3.1 document (public: it describes the API, it reveals no data)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from app.api.openapi import build_document

bp = Blueprint("openapi", __name__)


@bp.get("/api/openapi.json")
def openapi_document():
    return jsonify(build_document())
