"""Writes a random Llama checkpoint folder (config.json, model.safetensors, generation_config.json) with Hugging
Face transformers, so that `mstar ... --model DIR` can be run on a machine without network access or model
downloads. The default geometry is Llama-3.2-1B's (head dim 64); weights are bf16, made on the GPU if there is one.

    python3 write_random_llama.py OUT_DIR [--layers N]
"""
import argparse

import torch
import transformers

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--layers", type=int, default=16)
args = parser.parse_args()

config = transformers.LlamaConfig(
    hidden_size=2048, intermediate_size=8192, num_hidden_layers=args.layers, num_attention_heads=32,
    num_key_value_heads=8, head_dim=64, vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0,
    rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192},
    tie_word_embeddings=True, bos_token_id=128000, eos_token_id=128001)
torch.manual_seed(0)
with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
model.save_pretrained(args.out)
print("wrote", args.out)
