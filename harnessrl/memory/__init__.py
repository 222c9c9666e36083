"""The training memory on Chroma and the offline embedding model it uses (imported lazily: chromadb is heavy)."""

__all__ = ["MiniLMEmbedder", "TrainingMemory", "get_embedder"]


def __getattr__(name: str):
    if name in ("MiniLMEmbedder", "get_embedder"):
        from harnessrl.memory import embedding

        return getattr(embedding, name)
    if name == "TrainingMemory":
        from harnessrl.memory.store import TrainingMemory

        return TrainingMemory
    raise AttributeError(f"module 'harnessrl.memory' has no attribute {name!r}")
