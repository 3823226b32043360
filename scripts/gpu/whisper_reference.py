"""transformers' own bf16 band on the tiny Whisper checkpoint, for the Java engine's bf16 numbers to be read against.

    python3 whisper_reference.py FIXTURE_DIR [OUT.md]

FIXTURE_DIR is what scripts/fixtures/write_whisper_fixtures.py writes (checkpoint, reference.safetensors, cases.json).
On the GPU, WhisperForConditionalGeneration runs every case of cases.json twice, in fp32 (TF32 off) and in bf16, with
the same greedy loop and logits processors as the fixture script; it prints, as the Java harness does, the relative L2
error of the encoder output and of each case's logits (up to the first differing token) against the fixture's fp32
CPU reference, and how many greedy tokens agree.
"""
import json
import sys

import torch
import transformers
from safetensors.torch import load_file
from transformers.generation.logits_process import WhisperTimeStampLogitsProcessor
from transformers.modeling_outputs import BaseModelOutput

FIXTURE = sys.argv[1]
SR = 16000
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
ref = load_file(f"{FIXTURE}/reference.safetensors")
cases = json.load(open(f"{FIXTURE}/cases.json"))
gen = json.load(open(f"{FIXTURE}/generation_config.json"))
eot, sot = gen["eos_token_id"], gen["decoder_start_token_id"]
extractor = transformers.WhisperFeatureExtractor(feature_size=80, sampling_rate=SR)


def audio(recipe):
    parts = [torch.zeros(int(a[8:]) * SR) if a.startswith("silence:") else ref[f"audio.{a}"] for a in recipe]
    return torch.cat(parts)


def rel(got, want):
    got, want = got.double().cpu(), want.double().cpu()
    return float((got - want).norm() / want.norm())


def run(dtype):
    model = transformers.WhisperForConditionalGeneration.from_pretrained(FIXTURE, dtype=dtype,
                                                                         attn_implementation="eager").cuda().eval()
    rows = []
    with torch.no_grad():
        enc = model.model.encoder(ref["features.tone"][None].cuda().to(dtype)).last_hidden_state[0].float()
    rows.append(("encoder output (tone)", rel(enc, ref["encoder.tone"]), ""))
    for case in cases["cases"]:
        samples = audio(case["audio"])
        windows = [samples[i:i + 30 * SR] for i in range(0, len(samples), 30 * SR)]
        got_logits, want_logits, tokens, want_tokens = [], [], [], []
        for w, chunk in enumerate(windows):
            key = f"{case['name']}.{w}"
            feats = extractor(chunk.numpy(), sampling_rate=SR, return_tensors="pt").input_features.cuda().to(dtype)
            with torch.no_grad():
                enc = model.model.encoder(feats).last_hidden_state
            prompt = ref[key + ".prompt"].tolist()  # the detected language and previous text as the reference's
            seq = list(prompt)
            processor = WhisperTimeStampLogitsProcessor(model.generation_config, len(prompt)) \
                if case["timestamps"] else None
            for step in range(len(ref[key + ".tokens"])):
                with torch.no_grad():
                    logits = model(encoder_outputs=BaseModelOutput(last_hidden_state=enc),
                                   decoder_input_ids=torch.tensor([seq]).cuda()).logits[0, -1].float()
                got_logits.append(logits.cpu())
                scores = logits.clone()
                scores[gen["suppress_tokens"]] = -float("inf")
                if step == 0:
                    scores[gen["begin_suppress_tokens"]] = -float("inf")
                if processor is not None:
                    scores = processor(torch.tensor([seq]).cuda(), scores[None])[0]
                seq.append(int(torch.argmax(scores)))
                tokens.append(seq[-1])
            want_tokens += ref[key + ".tokens"].tolist()
            want_logits += list(ref[key + ".logits"])
        same = 0
        while same < len(want_tokens) and same < len(tokens) and tokens[same] == want_tokens[same]:
            same += 1
        n = min(len(want_tokens), same + 1)
        err = rel(torch.stack(got_logits[:n]), torch.stack(want_logits[:n]))
        agree = f"identical ({same})" if same == len(want_tokens) else f"{same} of {len(want_tokens)} identical"
        rows.append((f"logits, {case['name']} ({n} positions)", err, agree))
    return rows


out = []
for name, dtype in [("fp32", torch.float32), ("bf16", torch.bfloat16)]:
    out.append(f"\n## transformers on the GPU, {name}, vs transformers fp32 (CPU)\n\n| quantity | rel. L2 error | greedy "
               "tokens |\n|---|---|---|")
    for what, err, agree in run(dtype):
        out.append(f"| {what} | {err:.3g} | {agree} |")
text = "\n".join(out) + f"\n\ntransformers {transformers.__version__}, torch {torch.__version__}\n"
print(text)
if len(sys.argv) > 2:
    open(sys.argv[2], "w").write(text)
