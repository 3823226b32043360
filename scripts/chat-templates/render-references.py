#!/usr/bin/env python3
"""Render the published chat templates the way transformers' apply_chat_template does.

Reads templates/, conversations.json and cases.json from the test-data folder and writes references.json beside
them: for each template x conversation x add_generation_prompt x extra variables, the rendered text, or the error
jinja2 raised (its class, message and the template line). ChatTemplatePublishedTest compares the Java renderer with
these byte for byte.

With transformers importable, its own render_jinja_template renders (the function apply_chat_template calls;
older versions: the environment of its _compile_jinja_template); without it, jinja2 configured as transformers configures it (ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and loopcontrols; tojson = json.dumps(ensure_ascii=False); raise_exception and strftime_now globals).
The output's "renderer" field says which one ran.

    python3 scripts/chat-templates/render-references.py            # writes references.json
    python3 scripts/chat-templates/render-references.py --check    # compares with the committed file, exit 1 on a difference
"""
import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

DATA = (Path(__file__).resolve().parents[2]
        / "flink-mstar-operators/src/test/resources/org/mstar/model/chat/published")


def transformers_renderer():
    """transformers' own renderer, or None when transformers is not importable.

    render_jinja_template is what apply_chat_template calls (transformers 4.52 and later); older versions render
    with the environment of _compile_jinja_template and the same arguments, which is used then.
    """
    try:
        import transformers
        from transformers.utils import chat_template_utils
    except ImportError:
        return None, None
    version = "transformers " + transformers.__version__
    if hasattr(chat_template_utils, "render_jinja_template"):
        def render(template, messages, tools, add_generation_prompt, variables):
            rendered, _ = chat_template_utils.render_jinja_template(
                conversations=[messages], tools=tools, chat_template=template,
                add_generation_prompt=add_generation_prompt, **variables)
            return rendered[0]

        return render, version + " render_jinja_template"
    if hasattr(chat_template_utils, "_compile_jinja_template"):
        def render(template, messages, tools, add_generation_prompt, variables):
            return chat_template_utils._compile_jinja_template(template).render(
                messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt,
                **variables)

        return render, version + " _compile_jinja_template"
    return None, None


def jinja2_renderer():
    """jinja2 set up as transformers' _compile_jinja_template sets it up, rendering with the same arguments."""
    import jinja2
    import jinja2.ext
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now

    def render(template, messages, tools, add_generation_prompt, variables):
        return env.from_string(template).render(messages=messages, tools=tools, documents=None,
                                                add_generation_prompt=add_generation_prompt, **variables)

    return render, "jinja2 " + jinja2.__version__ + " configured as transformers configures it"


def template_line(error):
    """The template line jinja2 reports for an error (its traceback frames of <template>), or None."""
    line = getattr(error, "lineno", None)
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with references.json instead of writing it")
    parser.add_argument("--jinja2", action="store_true", help="use jinja2 even when transformers is importable")
    args = parser.parse_args()

    render, renderer = (None, None) if args.jinja2 else transformers_renderer()
    if render is None:
        render, renderer = jinja2_renderer()
    conversations = json.loads((DATA / "conversations.json").read_text(encoding="utf-8"))
    cases = json.loads((DATA / "cases.json").read_text(encoding="utf-8"))

    out = []
    for name, spec in cases.items():
        template = (DATA / "templates" / (name + ".jinja")).read_text(encoding="utf-8")
        for conversation in spec["conversations"]:
            conv = conversations[conversation]
            for variables in spec["variables"]:
                for gen in (False, True):
                    tokens = {"bos_token": spec["bos_token"], "eos_token": spec["eos_token"]}
                    case = {"template": name, "conversation": conversation, "add_generation_prompt": gen,
                            "variables": variables}
                    try:
                        case["rendered"] = render(template, conv["messages"], conv.get("tools"), gen,
                                                  {**tokens, **variables})
                    except Exception as e:  # the template refused the conversation, or jinja2 failed
                        case["error"] = {"type": type(e).__name__, "message": str(e), "line": template_line(e)}
                    out.append(case)

    result = {"renderer": renderer, "cases": out}
    text = json.dumps(result, indent=1, ensure_ascii=False) + "\n"
    target = DATA / "references.json"
    print("renderer:", renderer)
    print(len(out), "cases,", sum("error" in c for c in out), "of them errors")
    if args.check:
        committed = json.loads(target.read_text(encoding="utf-8"))
        differ = [i for i, (a, b) in enumerate(zip(committed["cases"], out)) if a != b]
        if len(committed["cases"]) != len(out) or differ:
            for i in differ:
                print("differs:", out[i]["template"], out[i]["conversation"], out[i]["variables"],
                      "gen=" + str(out[i]["add_generation_prompt"]))
            print("references.json differs from this renderer's output (committed by: " + committed["renderer"] + ")")
            return 1
        print("references.json is what this renderer writes (committed by: " + committed["renderer"] + ")")
        return 0
    target.write_text(text, encoding="utf-8")
    print("wrote", target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
