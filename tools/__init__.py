"""Scripts for the people who run the course (not part of the lessons' library)."""
