import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("hardpos/text_only_accuracy")
launch_gradio_widget(module)
