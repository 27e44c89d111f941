"""A FastAPI JSON endpoint for bench/run.py's scenario G (TechEmpower's JSON test shape)."""

from fastapi import FastAPI

app = FastAPI()


@app.get("/json")
async def json() -> dict[str, str]:
    return {"message": "Hello, world!"}
