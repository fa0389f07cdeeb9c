"""Shared test settings: never touch the network, keep torch on the two CI cores."""
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
