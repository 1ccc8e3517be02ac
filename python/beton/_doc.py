"""Docstring sections that several public methods share, written once: a docstring names one by
its key on a line of its own (``{returns_report}``), and ``fill`` puts the section there,
indented as that line is."""


def fill(sections):
    """A decorator that fills ``sections`` (``{key: text}``) into the decorated function's
    docstring."""

    def decorate(f):
        doc = f.__doc__ or ""
        for key, section in sections.items():
            if key in doc:
                indent = doc[:doc.index(key)].rsplit("\n", 1)[-1]
                doc = doc.replace(key, section.replace("\n", "\n" + indent))
        f.__doc__ = doc
        return f

    return decorate
