"""The reference rescaling backend: a small REST service that holds a bucket placement and
applies Pufferscale plans; it documents the push contract other backends implement."""
