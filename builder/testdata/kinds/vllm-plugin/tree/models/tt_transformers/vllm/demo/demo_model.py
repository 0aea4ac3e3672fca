class DemoForCausalLM:
    """Registered through EXTRA_MODELS_DIR; the build fails before vLLM could load it."""
