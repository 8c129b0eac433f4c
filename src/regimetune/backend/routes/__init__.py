"""One router per resource: policy, placement, rescale, health."""
