"""Evidence (SPEC §4): the content-addressed store, admitted facts, their bindings and citations."""
