"""Other programs as configurations: a user's command, or an engine (safetensors, transformers,
diffusers, llama.cpp, Run:ai) run as its users run it with the knobs that change how it reads
the weights; each run watched and counted as a load, and the engine's own snippet written."""
