// The users' page entry (users.html): the console's styles and components, its own frame.
import { render } from 'preact';
import '@picocss/pico/css/pico.min.css';
import 'uplot/dist/uPlot.min.css';
import '../style.css';
import './userpage.css';
import { UserApp } from './app.tsx';

render(<UserApp />, document.getElementById('app')!);
