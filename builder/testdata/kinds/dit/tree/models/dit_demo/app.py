"""A small ASGI app of kind tt-dit-server, for tt-model's tests: FastAPI, served by uvicorn.

It stands in for a diffusion server: it reads the mesh shape the way those servers do (from
the variable runtime.mesh_shape_env names) and "generates" a deterministic description.
"""
import hashlib
import os

from fastapi import FastAPI
from pydantic import BaseModel

MESH_ENV = "DIT_MESH_SHAPE"
state = {}
app = FastAPI()


# A startup handler (Debian's FastAPI predates lifespan=): what a real server does here is
# claim the mesh and warm the pipeline; uvicorn logs "Application startup complete" after it.
@app.on_event("startup")
def warm():
    state["mesh"] = os.environ.get(MESH_ENV, "")
    state["model"] = os.environ.get("HF_MODEL", "")


class Prompt(BaseModel):
    prompt: str
    steps: int = 4


@app.get("/health")
def health():
    return {"status": "ok"}


@app.post("/v1/generate")
def generate(req: Prompt):
    digest = hashlib.sha256(f"{req.prompt}/{req.steps}".encode()).hexdigest()[:16]
    return {"prompt": req.prompt, "steps": req.steps, "image_sha": digest, "mesh": state["mesh"],
            "mesh_device": os.environ.get("MESH_DEVICE"), "model": state["model"]}
