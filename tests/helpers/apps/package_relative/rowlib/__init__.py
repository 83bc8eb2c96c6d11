"""A package whose kernel module imports its helpers relatively."""
